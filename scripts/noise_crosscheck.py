#!/usr/bin/env python3
"""Independent test vectors for natter's link handshake and secure channel.

Runs Noise_XXpsk0_25519_ChaChaPoly_SHA512 with natter's prologue and payloads between two in-process peers built on
PyPI's `noiseprotocol` 0.3.1 (pure Python over `cryptography`, so nothing here shares code with libsodium), using
FIXED static, ephemeral and identity keys, and prints every handshake message and the first transport frames as
hex. `Tests/NatterSyncTests/CrossCheckTests.swift` embeds this output and checks that natter's own machines, given
the same keys, produce the same bytes.

    pip install noiseprotocol==0.3.1
    python3 scripts/noise_crosscheck.py

Layouts are in docs/protocol.md §2. Two things need noiseprotocol's internals:
  * fixed ephemeral keys: `set_keypair_from_private_bytes(Keypair.EPHEMERAL, ...)`, which it allows for testing
    (with a warning, silenced here);
  * the identity binding signs the handshake hash *just before* the payload is encrypted, which noiseprotocol does
    not expose mid-message. The script wraps the connection's SymmetricState.encrypt_and_hash so that a payload
    given as a `LazyPayload` is built from `h` at that moment, and wraps decrypt_and_hash to record `h` before each
    decryption so the reader can verify the binding.
"""
import hashlib
import warnings

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from noise.connection import Keypair, NoiseConnection

PROTOCOL_NAME = b"Noise_XXpsk0_25519_ChaChaPoly_SHA512"
PROLOGUE = b"natter/v1/link"
BINDING_DOMAIN = b"natter/v1/noise-static"
TRANSPORT_PLAINTEXT_MAX = 65535 - 16
REKEY_INTERVAL_FRAMES = 2  # tiny on purpose, so the vectors cross rekeys; natter's default is 2^16
KIND_MESSAGE, KIND_GOODBYE = 0, 1


def counting(start):
    """The 32 bytes start, start+1, ..., start+31."""
    return bytes(range(start, start + 32))


NETWORK_KEY = counting(0x00)
INITIATOR_IDENTITY_SEED = counting(0x20)
RESPONDER_IDENTITY_SEED = counting(0x40)
INITIATOR_STATIC = counting(0x60)
RESPONDER_STATIC = counting(0x80)
INITIATOR_EPHEMERAL = counting(0xA0)
RESPONDER_EPHEMERAL = counting(0xC0)
BIG_MESSAGE = bytes(i % 251 for i in range(70_000))


def crypto_kdf(master, context, subkey_id=0, length=32):
    """libsodium's crypto_kdf_derive_from_key: keyed BLAKE2b, salt = id (u64 LE) || 0^8, personal = context || 0^8."""
    salt = subkey_id.to_bytes(8, "little") + bytes(8)
    return hashlib.blake2b(b"", digest_size=length, key=master, salt=salt, person=context + bytes(8)).digest()


PSK = crypto_kdf(NETWORK_KEY, b"natrhand")  # NetworkKey.handshakeKey


def u16(n):
    return n.to_bytes(2, "big")


def frame(message):
    """Handshake messages and transport frames alike travel as u16 BE length || bytes."""
    assert len(message) <= 65535
    return u16(len(message)) + bytes(message)


def unframe(wire):
    length = int.from_bytes(wire[:2], "big")
    assert len(wire) == 2 + length
    return bytes(wire[2:])


class LazyPayload:
    def __init__(self, make):
        self.make = make


class Peer:
    def __init__(self, initiator, identity_seed, static, ephemeral):
        self.identity = Ed25519PrivateKey.from_private_bytes(identity_seed)
        self.identity_public = self.identity.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.conn = NoiseConnection.from_name(PROTOCOL_NAME)
        self.conn.set_psks(psk=PSK)
        self.conn.set_prologue(PROLOGUE)
        if initiator:
            self.conn.set_as_initiator()
        else:
            self.conn.set_as_responder()
        self.conn.set_keypair_from_private_bytes(Keypair.STATIC, static)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.conn.set_keypair_from_private_bytes(Keypair.EPHEMERAL, ephemeral)
            self.conn.start_handshake()
        self.static_public = self.conn.noise_protocol.keypairs["s"].public_bytes
        self.hashes_before_decrypt = []
        # Kept: noiseprotocol drops its own references when the handshake finishes.
        self.handshake_state = self.conn.noise_protocol.handshake_state
        state = self.conn.noise_protocol.symmetric_state
        encrypt_and_hash, decrypt_and_hash = state.encrypt_and_hash, state.decrypt_and_hash

        def lazy_encrypt_and_hash(plaintext):
            if isinstance(plaintext, LazyPayload):
                plaintext = plaintext.make(bytes(state.h))
            return encrypt_and_hash(plaintext)

        def recording_decrypt_and_hash(ciphertext):
            self.hashes_before_decrypt.append(bytes(state.h))
            return decrypt_and_hash(ciphertext)

        state.encrypt_and_hash = lazy_encrypt_and_hash
        state.decrypt_and_hash = recording_decrypt_and_hash
        self.sent_frames = 0
        self.received_frames = 0

    def binding(self, handshake_hash):
        """Identity public key || Ed25519 signature over len(domain) || domain || static public key || h."""
        signed = bytes([len(BINDING_DOMAIN)]) + BINDING_DOMAIN + self.static_public + handshake_hash
        return self.identity_public + self.identity.sign(signed)

    def check_binding(self, binding):
        remote_static = self.handshake_state.rs.public_bytes
        signed = bytes([len(BINDING_DOMAIN)]) + BINDING_DOMAIN + remote_static + self.hashes_before_decrypt[-1]
        Ed25519PublicKey.from_public_bytes(bytes(binding[:32])).verify(bytes(binding[32:]), signed)  # raises if invalid
        return bytes(binding[:32])

    def send(self, kind, body):
        """One record (kind u8 || length u32 BE || body), cut into frames of at most 65519 plaintext bytes."""
        record = bytes([kind]) + len(body).to_bytes(4, "big") + body
        wire = b""
        for offset in range(0, len(record), TRANSPORT_PLAINTEXT_MAX):
            wire += frame(self.conn.encrypt(record[offset:offset + TRANSPORT_PLAINTEXT_MAX]))
            self.sent_frames += 1
            if self.sent_frames % REKEY_INTERVAL_FRAMES == 0:
                self.conn.rekey_outbound_cipher()
        return wire

    def receive(self, wire):
        """The records in `wire` (whole frames holding whole records), as (kind, body) pairs."""
        stream = b""
        while wire:
            length = int.from_bytes(wire[:2], "big")
            stream += self.conn.decrypt(bytes(wire[2:2 + length]))
            wire = wire[2 + length:]
            self.received_frames += 1
            if self.received_frames % REKEY_INTERVAL_FRAMES == 0:
                self.conn.rekey_inbound_cipher()
        records = []
        while stream:
            length = int.from_bytes(stream[1:5], "big")
            records.append((stream[0], stream[5:5 + length]))
            stream = stream[5 + length:]
        return records


def main():
    initiator = Peer(True, INITIATOR_IDENTITY_SEED, INITIATOR_STATIC, INITIATOR_EPHEMERAL)
    responder = Peer(False, RESPONDER_IDENTITY_SEED, RESPONDER_STATIC, RESPONDER_EPHEMERAL)
    out = [("psk", PSK)]  # printed so the test can check NetworkKey.handshakeKey's derivation too

    # Message 1: version list [1].
    message1 = frame(initiator.conn.write_message(bytes([1]) + u16(1)))
    assert responder.conn.read_message(unframe(message1)) == bytes([1]) + u16(1)
    out.append(("handshake1", message1))

    # Message 2: chosen version 1 || responder's binding.
    message2 = frame(responder.conn.write_message(LazyPayload(lambda h: u16(1) + responder.binding(h))))
    payload2 = initiator.conn.read_message(unframe(message2))
    assert payload2[:2] == u16(1) and len(payload2) == 2 + 96
    assert initiator.check_binding(payload2[2:]) == responder.identity_public
    out.append(("handshake2", message2))

    # Message 3: initiator's binding.
    message3 = frame(initiator.conn.write_message(LazyPayload(lambda h: initiator.binding(h))))
    payload3 = responder.conn.read_message(unframe(message3))
    assert responder.check_binding(payload3) == initiator.identity_public
    assert initiator.conn.handshake_finished and responder.conn.handshake_finished
    assert initiator.conn.get_handshake_hash() == responder.conn.get_handshake_hash()
    out.append(("handshake3", message3))
    out.append(("handshakeHash", initiator.conn.get_handshake_hash()))

    # Transport, with a rekey every 2 frames in each direction.
    steps = [
        ("initiatorHello", initiator, responder, KIND_MESSAGE, b"hello from the initiator"),
        ("responderHello", responder, initiator, KIND_MESSAGE, b"hello from the responder"),
        ("initiatorBig", initiator, responder, KIND_MESSAGE, BIG_MESSAGE),  # two frames, rekey between them
        ("responderLast", responder, initiator, KIND_MESSAGE, b"last words"),
        ("responderGoodbye", responder, initiator, KIND_GOODBYE, b""),
        ("initiatorGoodbye", initiator, responder, KIND_GOODBYE, b""),
    ]
    for name, sender, receiver, kind, body in steps:
        wire = sender.send(kind, body)
        assert receiver.receive(wire) == [(kind, body)]
        if len(wire) > 256:
            out.append((name + "Length", str(len(wire))))
            out.append((name + "SHA512", hashlib.sha512(wire).digest()))
        else:
            out.append((name, wire))

    for name, value in out:
        print(name, value if isinstance(value, str) else value.hex())


if __name__ == "__main__":
    main()
