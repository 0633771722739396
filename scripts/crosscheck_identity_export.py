# Independent reader and writer of natter's identity export file, written from docs/protocol.md §9.3 only: rebuilds
# the documented test vector from its inputs with Python's `cryptography` (Argon2id, ChaCha20-Poly1305, X25519,
# Ed25519), hashlib (BLAKE2b) and HChaCha20 written out below, compares it byte for byte, then opens the documented
# file with the passphrase and checks the keys inside. Usage: python3 scripts/crosscheck_identity_export.py docs/protocol.md
import hashlib, re, struct, sys
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.exceptions import InvalidTag
import unicodedata

text = open(sys.argv[1]).read()
def block(info):
    match = re.search(r"```" + re.escape(info) + r"\n(.*?)```", text, re.S)
    if not match: sys.exit(f"no ```{info} block")
    return match.group(1)
inputs = dict(line.split(": ", 1) for line in block("text idexport-inputs").strip().splitlines())
documented = bytes.fromhex("".join(block("hex idexport-file").split()))

def hchacha20(key, nonce16):
    """HChaCha20 (draft-irtf-cfrg-xchacha §2.2): the ChaCha20 block function's rows 0 and 3, without the final add."""
    def rotl(v, c): return ((v << c) & 0xffffffff) | (v >> (32 - c))
    def quarter(s, a, b, c, d):
        s[a] = (s[a] + s[b]) & 0xffffffff; s[d] = rotl(s[d] ^ s[a], 16)
        s[c] = (s[c] + s[d]) & 0xffffffff; s[b] = rotl(s[b] ^ s[c], 12)
        s[a] = (s[a] + s[b]) & 0xffffffff; s[d] = rotl(s[d] ^ s[a], 8)
        s[c] = (s[c] + s[d]) & 0xffffffff; s[b] = rotl(s[b] ^ s[c], 7)
    s = [0x61707865, 0x3320646e, 0x79622d32, 0x6b206574] + list(struct.unpack("<8I", key)) + list(struct.unpack("<4I", nonce16))
    for _ in range(10):
        quarter(s, 0, 4, 8, 12); quarter(s, 1, 5, 9, 13); quarter(s, 2, 6, 10, 14); quarter(s, 3, 7, 11, 15)
        quarter(s, 0, 5, 10, 15); quarter(s, 1, 6, 11, 12); quarter(s, 2, 7, 8, 13); quarter(s, 3, 4, 9, 14)
    return struct.pack("<8I", *(s[0:4] + s[12:16]))

def xchacha(key, nonce24):
    """XChaCha20-Poly1305 (IETF): ChaCha20-Poly1305 under HChaCha20(key, nonce[:16]) with nonce 0000 ‖ nonce[16:]."""
    return ChaCha20Poly1305(hchacha20(key, nonce24[:16])), b"\0\0\0\0" + nonce24[16:]

def derive(passphrase, salt, passes, kib):
    password = unicodedata.normalize("NFC", passphrase).encode()
    return Argon2id(salt=salt, length=32, iterations=passes, lanes=1, memory_cost=kib).derive(password)

# Write: the vector from its inputs.
salt, nonce = bytes.fromhex(inputs["salt"]), bytes.fromhex(inputs["nonce"])
passes, kib = int(inputs["passes"]), int(inputs["memory-kib"])
header = b"NATTERID" + bytes([1, 1]) + struct.pack(">II", passes, kib) + salt + nonce
assert len(header) == 58
plaintext = bytes.fromhex(inputs["seed"]) + bytes.fromhex(inputs["encryption-secret"]) + b"\x01" + bytes.fromhex(inputs["network-key"])
aead, ietf_nonce = xchacha(derive(inputs["passphrase"], salt, passes, kib), nonce)
body = header + aead.encrypt(ietf_nonce, plaintext, header)
built = body + hashlib.blake2b(body, digest_size=16).digest()
ok = built == documented
print(f"identity export vector: {len(built)} bytes, {'MATCH' if ok else 'DIFFER'}")

# Read: the documented file, as a second implementation would.
f = documented
assert len(f) == 187 and f[:8] == b"NATTERID" and f[8] == 1 and f[9] == 1, "header"
assert hashlib.blake2b(f[:171], digest_size=16).digest() == f[171:], "checksum"
passes, kib = struct.unpack(">II", f[10:18])
aead, ietf_nonce = xchacha(derive(inputs["passphrase"], f[18:34], passes, kib), f[34:58])
opened = aead.decrypt(ietf_nonce, f[58:171], f[:58])
read_ok = opened[:32].hex() == inputs["seed"] and opened[32:64].hex() == inputs["encryption-secret"] \
    and opened[64] == 1 and opened[65:].hex() == inputs["network-key"]
try:
    aead2, n2 = xchacha(derive(inputs["passphrase"] + "!", f[18:34], passes, kib), f[34:58])
    aead2.decrypt(n2, f[58:171], f[:58]); wrong_refused = False
except InvalidTag:
    wrong_refused = True
print(f"opened with the passphrase: keys {'MATCH' if read_ok else 'DIFFER'}; a wrong passphrase is "
      f"{'refused' if wrong_refused else 'ACCEPTED'}")
ok &= read_ok and wrong_refused
print("ALL MATCH" if ok else "MISMATCH"); sys.exit(0 if ok else 1)
