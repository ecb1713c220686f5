"""Verify a compact JWS against a JWK Set with PyJWT, an independent JOSE
implementation (with the `cryptography` backend).

Usage: verify_with_pyjwt.py JWKS_FILE TOKEN_FILE NOW_UNIX

First, independently of pki, every `kid` in the JWK Set must be the RFC 7638
thumbprint of its key, computed here from the JWK members (and this
computation is checked against the RFC's worked example): exit 2 naming the
key when one is not.

Exit 0 and print the kid when the token verifies; exit 1 with the reason
when it does not (unknown kid, bad signature, expired at NOW_UNIX). The
time checks are done here against NOW_UNIX because PyJWT reads the real
clock and the tests run on a simulated one.
"""

import base64
import hashlib
import json
import sys

import jwt
from jwt import PyJWKSet

# RFC 7638 section 3.1: the required members of each key type, in the
# lexicographic order the thumbprint's JSON uses.
REQUIRED = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n"), "OKP": ("crv", "kty", "x")}

# RFC 7638 section 3.1's worked example.
RFC_EXAMPLE = {
    "kty": "RSA",
    "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
    "e": "AQAB",
    "alg": "RS256",
    "kid": "2011-04-29",
}
RFC_EXAMPLE_THUMBPRINT = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def thumbprint(jwk: dict) -> str:
    members = {m: jwk[m] for m in REQUIRED[jwk["kty"]]}
    canonical = json.dumps(members, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(canonical.encode("utf-8")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def check_kids(jwks_text: str) -> str | None:
    """The first key whose kid is not its thumbprint, described; else None."""
    if thumbprint(RFC_EXAMPLE) != RFC_EXAMPLE_THUMBPRINT:
        return "this script's RFC 7638 thumbprint does not match the RFC's example"
    for i, jwk in enumerate(json.loads(jwks_text)["keys"]):
        if jwk.get("kty") not in REQUIRED:
            return f"key {i} has an unknown kty {jwk.get('kty')!r}"
        want = thumbprint(jwk)
        if jwk.get("kid") != want:
            return f"key {i}: kid {jwk.get('kid')!r} is not its RFC 7638 thumbprint {want!r}"
    return None


def main() -> int:
    jwks_path, token_path, now = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(jwks_path, encoding="utf-8") as f:
        jwks_text = f.read()
    bad = check_kids(jwks_text)
    if bad is not None:
        print(f"bad JWK Set: {bad}", file=sys.stderr)
        return 2
    jwks = PyJWKSet.from_json(jwks_text)
    with open(token_path, encoding="utf-8") as f:
        token = f.read().strip()
    header = jwt.get_unverified_header(token)
    kid = header.get("kid")
    keys = [k for k in jwks.keys if k.key_id == kid]
    if not keys:
        print(f"rejected: no key {kid} in the JWK Set", file=sys.stderr)
        return 1
    try:
        claims = jwt.decode(
            token,
            key=keys[0].key,
            algorithms=["ES256", "RS256"],
            options={"verify_exp": False, "verify_nbf": False, "verify_aud": False},
        )
    except jwt.InvalidTokenError as e:
        print(f"rejected: {e}", file=sys.stderr)
        return 1
    if "exp" in claims and now >= claims["exp"]:
        print(f"rejected: expired at {claims['exp']}", file=sys.stderr)
        return 1
    if "nbf" in claims and now < claims["nbf"]:
        print(f"rejected: not valid before {claims['nbf']}", file=sys.stderr)
        return 1
    print(json.dumps({"kid": kid, "claims": claims}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
