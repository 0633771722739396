# Independent implementation of the natter record encoding and of the key slots of opening commits (form 3, and form
# 4 with a removal notice), written from docs/protocol.md only: rebuilds every record vector (§1.8) and every key-slot
# vector (§10.2) there with Python's
# `cryptography` (Ed25519, X25519, ChaCha20-Poly1305) and hashlib (BLAKE2b), and compares bytes, signature and id.
# Usage: python3 scripts/crosscheck_record_vectors.py docs/protocol.md
import re, sys, hashlib, struct
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives import serialization

text = open(sys.argv[1]).read()
blocks = {m.group(2): m.group(3) for m in re.finditer(r"```(\w+) (vector-[\w-]+)\n(.*?)```", text, re.S)}
names = sorted({k.split('-')[1] for k in blocks})
LABEL = b"natter/v1/record"
ok = True
for n in names:
    kv = {}; deps = []
    for line in blocks[f"vector-{n}-inputs"].strip().splitlines():
        k, v = line.split(": ", 1)
        if k == "dependency":
            a, s = v.split(); deps.append((bytes.fromhex(a), int(s)))
        else:
            kv[k] = v
    payload = bytes.fromhex("".join(blocks[f"vector-{n}-payload"].split()))
    expected = bytes.fromhex("".join(blocks[f"vector-{n}-bytes"].split()))
    expected_id = "".join(blocks[f"vector-{n}-id"].split())
    sk = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(kv["seed"]))
    pk = sk.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert pk.hex() == kv["author"], ("author", n)
    assert [d[0] for d in deps] == sorted(d[0] for d in deps)
    body = bytes([1, int(kv["kind"])]) + bytes.fromhex(kv["conversation"]) + pk
    body += struct.pack(">Q", int(kv["sequence"])) + bytes.fromhex(kv["previous"]) + bytes.fromhex(kv["epoch"])
    body += struct.pack(">Qq", int(kv["lamport"]), int(kv["created"])) + struct.pack(">H", len(deps))
    for a, s in deps: body += a + struct.pack(">Q", s)
    header_len = len(body)
    body += struct.pack(">I", len(payload)) + payload
    framed = bytes([len(LABEL)]) + LABEL + body
    sig = sk.sign(framed)
    Ed25519PublicKey.from_public_bytes(pk).verify(expected[-64:], framed)  # documented signature verifies
    full = body + sig
    rid = hashlib.blake2b(full, digest_size=32).hexdigest()
    good = full == expected and rid == expected_id
    ok &= good
    print(f"vector {n}: {len(full)} bytes, header {header_len}, bytes {'MATCH' if full == expected else 'DIFFER'}, "
          f"signature {'MATCH' if sig == expected[-64:] else 'DIFFER'}, id {'MATCH' if rid == expected_id else 'DIFFER'}")


# Key slots (§10.2). crypto_kdf: BLAKE2b-256 keyed with the key, salt = subkey id (u64 LE) padded to 16, personal =
# the 8-byte context padded to 16. XChaCha20-Poly1305 = ChaCha20-Poly1305 under HChaCha20(key, nonce[0:16]) with the
# 12-byte nonce 0000 ‖ nonce[16:24].
def kdf(key, context):
    return hashlib.blake2b(b"", digest_size=32, key=key, salt=bytes(16), person=context + bytes(8)).digest()


def hchacha20(key, nonce16):
    def rotl(v, c): return ((v << c) & 0xffffffff) | (v >> (32 - c))
    def quarter(x, a, b, c, d):
        x[a] = (x[a] + x[b]) & 0xffffffff; x[d] = rotl(x[d] ^ x[a], 16)
        x[c] = (x[c] + x[d]) & 0xffffffff; x[b] = rotl(x[b] ^ x[c], 12)
        x[a] = (x[a] + x[b]) & 0xffffffff; x[d] = rotl(x[d] ^ x[a], 8)
        x[c] = (x[c] + x[d]) & 0xffffffff; x[b] = rotl(x[b] ^ x[c], 7)
    x = list(struct.unpack("<4I", b"expand 32-byte k") + struct.unpack("<8I", key) + struct.unpack("<4I", nonce16))
    for _ in range(10):
        for a, b, c, d in ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),
                           (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14)):
            quarter(x, a, b, c, d)
    return struct.pack("<8I", *(x[0:4] + x[12:16]))


def raw(public):
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


slot_blocks = {m.group(2): m.group(3) for m in re.finditer(r"```(\w+) (slots-[\w-]+)\n(.*?)```", text, re.S)}
slot_names = sorted({k.split('-')[1] for k in slot_blocks})
for n in slot_names:
    fields = {}
    for line in slot_blocks[f"slots-{n}-inputs"].strip().splitlines():
        k, v = line.split(": ", 1)
        fields.setdefault(k, []).append(v.split())
    key = bytes.fromhex(fields["key"][0][0]); nonce = bytes.fromhex(fields["nonce"][0][0])
    header = bytes.fromhex(fields["header"][0][0]); operation = bytes.fromhex(fields["operation"][0][0])
    parents = [(bytes.fromhex(e), bytes.fromhex(k)) for e, k in fields.get("parent", [])]
    members = sorted((bytes.fromhex(a), bytes.fromhex(p)) for a, p in fields["member"])
    e = X25519PrivateKey.from_private_bytes(kdf(key, b"natrslot")); E = raw(e.public_key())
    slots, tags, tag_key = struct.pack(">H", len(members)), b"", kdf(key, b"natrrost")
    for author, secret in members:
        own = X25519PrivateKey.from_private_bytes(secret)
        P = raw(own.public_key())
        shared = e.exchange(X25519PublicKey.from_public_bytes(P))
        assert shared == own.exchange(X25519PublicKey.from_public_bytes(E)), "both sides agree on the slot secret"
        hint = hashlib.blake2b(b"natter/v1/slot-hint" + E + P, digest_size=16, key=shared).digest()[:8]
        wrap = hashlib.blake2b(b"natter/v1/slot-key" + E + P, digest_size=32, key=shared).digest()
        slots += hint + ChaCha20Poly1305(wrap).encrypt(bytes(12), key, b"")
        tags += hashlib.blake2b(author, digest_size=16, key=tag_key).digest()[:8]
    body = bytes([len(parents)]) + b"".join(epoch + k for epoch, k in parents) + tags
    removed = sorted((bytes.fromhex(a), bytes.fromhex(p)) for a, p in fields.get("removed", []))
    if removed:  # form 4: the operation goes into the notice, under N = kdf(K, "natrnote"), checked by C
        form, notice_key = b"\x04", kdf(key, b"natrnote")
        authenticated = E + slots + bytes([len(removed)])
        for author, secret in removed:
            own = X25519PrivateKey.from_private_bytes(secret)
            P = raw(own.public_key())
            shared = e.exchange(X25519PublicKey.from_public_bytes(P))
            hint = hashlib.blake2b(b"natter/v1/notice-hint" + E + P, digest_size=16, key=shared).digest()[:8]
            mask = hashlib.blake2b(b"natter/v1/notice-mask" + E + P, digest_size=32, key=shared).digest()
            authenticated += hint + bytes(a ^ b for a, b in zip(notice_key, mask))
            # The member removed: finds its notice slot, unmasks N, checks it against C.
            mine = hashlib.blake2b(b"natter/v1/notice-hint" + E + P, digest_size=16,
                                   key=own.exchange(X25519PublicKey.from_public_bytes(E))).digest()[:8]
            assert mine == hint, "the member removed finds its notice slot"
        check = hashlib.blake2b(b"natter/v1/notice-check", digest_size=32, key=notice_key).digest()
        authenticated += check + struct.pack(">H", len(operation) + 16)
        authenticated += ChaCha20Poly1305(notice_key).encrypt(bytes(12), operation, header + authenticated)
    else:
        form, authenticated = b"\x03", E + slots
        body += operation
    sealed = ChaCha20Poly1305(hchacha20(key, nonce[:16])).encrypt(bytes(4) + nonce[16:], body, header + authenticated)
    payload = form + authenticated + nonce + sealed
    expected = bytes.fromhex("".join(slot_blocks[f"slots-{n}-payload"].split()))
    expected_e = bytes.fromhex("".join(slot_blocks[f"slots-{n}-ephemeral"].split()))
    good = payload == expected and E == expected_e
    ok &= good
    print(f"key slots {n}: {len(payload)} bytes, {len(members)} slots, {len(removed)} notice slots, ephemeral {'MATCH' if E == expected_e else 'DIFFER'}, "
          f"payload {'MATCH' if payload == expected else 'DIFFER'}")
print("ALL MATCH" if ok and len(names) >= 3 and slot_names else "MISMATCH"); sys.exit(0 if ok else 1)
