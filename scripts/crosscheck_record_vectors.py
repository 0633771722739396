# Independent implementation of the natter record encoding, written from docs/protocol.md only: rebuilds every
# test vector there with Python's `cryptography` (Ed25519) and hashlib (BLAKE2b) and compares bytes, signature and id.
# Usage: python3 scripts/crosscheck_record_vectors.py docs/protocol.md
import re, sys, hashlib, struct
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
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
print("ALL MATCH" if ok and len(names) >= 3 else "MISMATCH"); sys.exit(0 if ok else 1)
