"""Verify a compact JWS against a JWK Set with PyJWT, an independent JOSE
implementation (with the `cryptography` backend).

Usage: verify_with_pyjwt.py JWKS_FILE TOKEN_FILE NOW_UNIX

Exit 0 and print the kid when the token verifies; exit 1 with the reason
when it does not (unknown kid, bad signature, expired at NOW_UNIX). The
time checks are done here against NOW_UNIX because PyJWT reads the real
clock and the tests run on a simulated one.
"""

import json
import sys

import jwt
from jwt import PyJWKSet


def main() -> int:
    jwks_path, token_path, now = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(jwks_path, encoding="utf-8") as f:
        jwks = PyJWKSet.from_json(f.read())
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
