"""JWTs checked against a JWK Set that rotates, and identities that do not collide
across schemes.

The JWK Set is served by the test itself (a local HTTP endpoint, `JwksEndpoint`); the
server under test is started with `auth.jwt.jwks_url` pointing at it (`own_server`).
Rotating the set (a new `kid`, the old key removed) is picked up without a restart.
An API key named `alice-<marker>` and a token whose `sub` is `alice-<marker>` are two
owners (`key:...` and `jwt:...`) unless `auth.shared_identities` is on.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from langgraph_sdk import get_client
from langgraph_sdk.errors import AuthenticationError, NotFoundError

from conftest import eventually, marker, own_server


class JwksEndpoint:
    """Serves a JWK Set on 127.0.0.1 from a thread, counting fetches; `publish` swaps it."""

    def __init__(self):
        self.document = {"keys": []}
        self.hits = 0
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the stdlib's name)
                with endpoint._lock:
                    endpoint.hits += 1
                    body = json.dumps(endpoint.document).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/.well-known/jwks.json"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def publish(self, *keys: "SigningKey"):
        with self._lock:
            self.document = {"keys": [key.jwk for key in keys]}

    def close(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class SigningKey:
    """A private key, its `kid`, and its public half as a JWK."""

    def __init__(self, kind: str):
        self.kid = f"{kind}-{marker()[:8]}"
        if kind == "rsa":
            self.private, self.algorithm = rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256"
            jwk = RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        else:
            self.private, self.algorithm = ec.generate_private_key(ec.SECP256R1()), "ES256"
            jwk = ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        self.jwk = {**jwk, "kid": self.kid, "alg": self.algorithm, "use": "sig"}

    def token(self, sub: str, kid: str | None = None) -> str:
        claims = {"sub": sub, "exp": int(time.time()) + 300, "aud": "e2e", "iss": "e2e-jwks"}
        return jwt.encode(claims, self.private, algorithm=self.algorithm, headers={"kid": kid or self.kid})


@pytest.fixture
async def connect():
    """Opens SDK clients with a bearer token or an API key; closes them after the test."""
    opened = []

    def _connect(url: str, token: str | None = None, api_key: str | None = None):
        headers = {"Authorization": f"Bearer {token}"} if token else None
        c = get_client(url=url, api_key=api_key, headers=headers)
        opened.append(c)
        return c

    yield _connect
    for c in opened:
        await c.aclose()


@pytest.fixture
def jwks():
    endpoint = JwksEndpoint()
    yield endpoint
    endpoint.close()


async def test_jwks_rotation_is_picked_up_without_a_restart(jwks, connect):
    old, new, rsa_key = SigningKey("ec"), SigningKey("ec"), SigningKey("rsa")
    jwks.publish(old)
    # A 1 s cooldown between fetches keeps the test short; the default is 30 s.
    block = {"jwks_url": jwks.url, "jwks_cooldown_seconds": 1, "issuer": "e2e-jwks", "audience": "e2e"}
    with own_server({"auth": {"jwt": block, "scoping": "owner"}}) as url:
        assert jwks.hits == 1, "the set is fetched once at boot"
        sub = f"ada-{marker()}"
        before = connect(url, token=old.token(sub))
        thread = await before.threads.create()
        assert thread["metadata"]["owner"] == f"jwt:{sub}"

        # The provider rotates: new keys (new kids), the old one removed.
        jwks.publish(new, rsa_key)
        after = connect(url, token=new.token(sub))

        async def accepted():
            try:
                return await after.threads.get(thread["thread_id"])
            except AuthenticationError:
                return None  # still within the cooldown of the last fetch

        found = await eventually(accepted, lambda t: t is not None, timeout=10)
        assert found["thread_id"] == thread["thread_id"], "the same subject owns it under the new key"
        by_rsa = connect(url, token=rsa_key.token(sub))
        assert [t["thread_id"] for t in await by_rsa.threads.search()] == [thread["thread_id"]]

        with pytest.raises(AuthenticationError) as refused:
            await connect(url, token=old.token(sub)).threads.search()
        assert refused.value.body["message"] == "Token key is not known"


async def test_made_up_kids_do_not_hammer_the_jwks_provider(jwks, connect):
    key = SigningKey("ec")
    jwks.publish(key)
    with own_server({"auth": {"jwt": {"jwks_url": jwks.url, "issuer": "e2e-jwks", "audience": "e2e"}}}) as url:
        fetched = jwks.hits
        for _ in range(30):
            with pytest.raises(AuthenticationError):
                await connect(url, token=key.token("mallory", kid=marker())).threads.search()
        # The default cooldown (30 s) allows at most one fetch for all of them.
        assert jwks.hits - fetched <= 1, jwks.hits
        # The real kid is still accepted (no scoping here: any list will do).
        assert isinstance(await connect(url, token=key.token("ada")).threads.search(limit=1), list)


def _same_name_config(name: str, key: str, shared: bool | None) -> dict:
    auth = {
        "api_keys": {name: key},
        "jwt": {"algorithm": "HS256", "secret_env": "E2E_AUTH_JWT_SECRET"},
        "scoping": "owner",
    }
    if shared is not None:
        auth["shared_identities"] = shared
    return {"auth": auth}


@pytest.mark.parametrize("shared", [None, True], ids=["qualified", "shared"])
async def test_an_api_key_and_a_jwt_sub_of_the_same_name_are_two_owners_unless_shared(connect, shared):
    name, key, secret = f"alice-{marker()}", f"alice-key-{marker()}", f"e2e-jwt-secret-{marker()}"
    env = {"E2E_AUTH_JWT_SECRET": secret}
    with own_server(_same_name_config(name, key, shared), env=env) as url:
        by_key = connect(url, api_key=key)
        token = jwt.encode({"sub": name, "exp": int(time.time()) + 300}, secret, algorithm="HS256")
        by_token = connect(url, token=token)
        thread = await by_key.threads.create()
        await by_key.store.put_item(["notes"], key="k", value={"by": "key"})
        if shared:
            assert thread["metadata"]["owner"] == name
            assert (await by_token.threads.get(thread["thread_id"]))["thread_id"] == thread["thread_id"]
            assert [t["thread_id"] for t in await by_token.threads.search()] == [thread["thread_id"]]
            assert (await by_token.store.get_item(["notes"], key="k"))["value"] == {"by": "key"}
        else:
            assert thread["metadata"]["owner"] == f"key:{name}"
            with pytest.raises(NotFoundError):
                await by_token.threads.get(thread["thread_id"])
            assert await by_token.threads.search() == []
            assert await by_token.store.get_item(["notes"], key="k") is None
            mine = await by_token.threads.create()
            assert mine["metadata"]["owner"] == f"jwt:{name}"
            assert [t["thread_id"] for t in await by_key.threads.search()] == [thread["thread_id"]]
