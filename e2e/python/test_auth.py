"""Authentication and owner scoping, through the SDK's api_key and a Bearer header.

Each group starts a server of its own with an `auth` block (`own_server`): API keys
with owner scoping, and JWTs (HS256 with a secret from the environment, ES256 with a
public key file) with owner scoping and a permission. Identities carry a fresh marker
so that servers sharing one database (start mode) never see an earlier run's rows.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field

import httpx
import jwt
import pytest
import websockets
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from langgraph_sdk import get_client
from langgraph_sdk.errors import AuthenticationError, NotFoundError, PermissionDeniedError

from conftest import marker, own_server

YEARLY = "0 0 1 1 *"
HI = {"messages": [{"type": "human", "content": "hi"}]}


async def wait_echo(client, thread_id: str | None, timeout: float = 20.0) -> dict:
    """`runs.wait` of `echo` on HI, bounded: in start mode these servers share the
    database with run.sh's server, and a wait whose run another instance executed
    has been seen never to answer; this says so instead of hanging to the timeout."""
    try:
        return await asyncio.wait_for(client.runs.wait(thread_id, "echo", input=HI), timeout)
    except asyncio.TimeoutError:
        runs = [(r["run_id"], r["status"]) for r in await client.runs.list(thread_id)] if thread_id else "stateless"
        raise AssertionError(f"runs.wait gave no answer within {timeout}s; the thread's runs: {runs}") from None


@pytest.fixture
async def connect():
    """Opens SDK clients on demand (`connect(url, api_key=..., headers=...)`); closes them after the test."""
    opened = []

    def _connect(url: str, **kwargs):
        kwargs.setdefault("api_key", None)  # never fall back to LANGGRAPH_API_KEY from the environment
        c = get_client(url=url, **kwargs)
        opened.append(c)
        return c

    yield _connect
    for c in opened:
        await c.aclose()


# ------------------------------------------------------------------ API keys


@dataclass
class KeyedServer:
    url: str
    keys: dict[str, str]  # alice, bob, carol -> key
    ids: dict[str, str]  # alice, bob, carol -> identity
    # What alice made before any test ran; bob only ever reads, so his views stay empty.
    alice: dict = field(default_factory=dict)


@pytest.fixture(scope="module")
def keyed():
    m = marker()
    ids = {name: f"{name}-{m}" for name in ("alice", "bob", "carol")}
    keys = {name: f"{name}-key-{marker()}" for name in ids}
    config = {
        "auth": {
            # The three ways to give a key: literal, from the environment, object form.
            "api_keys": {
                ids["alice"]: keys["alice"],
                ids["bob"]: {"env": "E2E_AUTH_BOB_KEY"},
                ids["carol"]: {"key": keys["carol"]},
            },
            "scoping": "owner",
        }
    }
    with own_server(config, env={"E2E_AUTH_BOB_KEY": keys["bob"]}) as url:
        server = KeyedServer(url=url, keys=keys, ids=ids)
        server.alice = asyncio.run(_alice_makes_things(url, keys["alice"], m))
        yield server


async def _alice_makes_things(url: str, key: str, m: str) -> dict:
    async with get_client(url=url, api_key=key) as alice:
        thread = await alice.threads.create(metadata={"e2e": m})
        values = await wait_echo(alice, thread["thread_id"])
        assert [msg["content"] for msg in values["messages"]] == ["hi", "echo: hi"]
        made = {
            "thread": await alice.threads.get(thread["thread_id"]),
            "run": (await alice.runs.list(thread["thread_id"]))[0],
            "assistant": await alice.assistants.create(graph_id="echo", name=f"alice-{m}"),
            "cron": await alice.crons.create("echo", schedule=YEARLY, input=HI),
            "namespace": ["notes", m],
        }
        await alice.store.put_item(made["namespace"], key="k", value={"by": "alice"})
        return made


async def test_requests_without_a_valid_api_key_are_401(keyed, connect):
    for api_key in (None, "wrong-key-" + marker()):
        with pytest.raises(AuthenticationError) as raised:
            await connect(keyed.url, api_key=api_key).threads.search()
        assert raised.value.status_code == 401
        body = raised.value.body
        assert body["status"] == 401 and body["message"] and body["detail"]
        assert raised.value.response.headers["www-authenticate"].startswith("Bearer")
    # Health and server info stay public (load balancers, SDK capability checks).
    async with httpx.AsyncClient(base_url=keyed.url) as h:
        assert (await h.get("/ok")).status_code == 200
        assert (await h.get("/info")).status_code == 200


async def test_what_an_identity_makes_is_stamped_with_its_owner(keyed, connect):
    # An API key's principal is `key:<name>` (a token's is `jwt:<sub>`).
    alice = f"key:{keyed.ids['alice']}"
    for made in ("thread", "run", "assistant", "cron"):
        assert keyed.alice[made]["metadata"]["owner"] == alice, made
    # A client cannot claim another owner through metadata.
    client = connect(keyed.url, api_key=keyed.keys["alice"])
    claimed = await client.threads.create(metadata={"owner": f"key:{keyed.ids['bob']}"})
    assert claimed["metadata"]["owner"] == alice
    with pytest.raises(NotFoundError):
        await connect(keyed.url, api_key=keyed.keys["bob"]).threads.get(claimed["thread_id"])


async def test_another_identity_cannot_read_threads_or_runs(keyed, connect):
    bob = connect(keyed.url, api_key=keyed.keys["bob"])
    tid, rid = keyed.alice["thread"]["thread_id"], keyed.alice["run"]["run_id"]
    with pytest.raises(NotFoundError):
        await bob.threads.get(tid)
    with pytest.raises(NotFoundError):
        await bob.threads.get_state(tid)
    with pytest.raises(NotFoundError):
        await bob.runs.list(tid)
    with pytest.raises(NotFoundError):
        await bob.runs.get(tid, rid)
    assert await bob.threads.search() == []
    assert await bob.threads.count() == 0

    alice = connect(keyed.url, api_key=keyed.keys["alice"])
    assert (await alice.threads.get(tid))["values"]["messages"][-1]["content"] == "echo: hi"
    assert tid in [t["thread_id"] for t in await alice.threads.search(limit=100)]
    assert [r["run_id"] for r in await alice.runs.list(tid)] == [rid]


async def test_another_identitys_thread_events_are_refused_before_the_stream(keyed):
    """SSE answers 404 before any event; a WebSocket is accepted, then closed 4404 on
    a command other than the run.start a new thread would need (the peer's rule)."""
    tid = keyed.alice["thread"]["thread_id"]
    bob = {"x-api-key": keyed.keys["bob"]}
    async with httpx.AsyncClient(base_url=keyed.url, headers=bob) as h:
        sse = await h.post(f"/threads/{tid}/stream/events", json={"channels": ["values"]})
        assert sse.status_code == 404, sse.text
        bad = await h.post("/threads/nope/stream/events", json={"channels": ["values"]})
        assert bad.status_code == 422, bad.text
    url = keyed.url.replace("http://", "ws://", 1) + f"/threads/{tid}/stream/events"
    async with websockets.connect(url, additional_headers=bob) as socket:
        # The run.start a made-up thread id would take cannot start a run on hers.
        start = {"id": 1, "method": "run.start", "params": {"assistant_id": "echo", "input": HI}}
        await socket.send(json.dumps(start))
        answer = json.loads(await asyncio.wait_for(socket.recv(), 10))
        assert (answer["type"], answer["id"]) == ("error", 1), answer
        subscribe = {"id": 2, "method": "subscription.subscribe", "params": {"channels": ["values"]}}
        await socket.send(json.dumps(subscribe))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(socket.recv(), 10)
        assert closed.value.rcvd.code == 4404
    async with get_client(url=keyed.url, api_key=keyed.keys["alice"]) as alice:
        assert [r["run_id"] for r in await alice.runs.list(tid)] == [keyed.alice["run"]["run_id"]]


async def test_another_identity_cannot_change_threads_assistants_or_crons(keyed, connect):
    bob = connect(keyed.url, api_key=keyed.keys["bob"])
    tid = keyed.alice["thread"]["thread_id"]
    aid = keyed.alice["assistant"]["assistant_id"]
    cid = keyed.alice["cron"]["cron_id"]
    attempts = [
        ("threads.update", lambda: bob.threads.update(tid, metadata={"by": "bob"})),
        ("threads.delete", lambda: bob.threads.delete(tid)),
        ("runs.create", lambda: bob.runs.create(tid, "echo", input=HI)),
        ("assistants.update", lambda: bob.assistants.update(aid, name="bob's now")),
        ("assistants.delete", lambda: bob.assistants.delete(aid)),
        ("crons.delete", lambda: bob.crons.delete(cid)),
    ]
    for what, attempt in attempts:
        try:
            await attempt()
        except NotFoundError:
            continue
        pytest.fail(f"{what} on alice's resource did not answer 404 to bob")

    alice = connect(keyed.url, api_key=keyed.keys["alice"])
    thread = await alice.threads.get(tid)
    assert "by" not in thread["metadata"]
    assert [r["run_id"] for r in await alice.runs.list(tid)] == [keyed.alice["run"]["run_id"]]
    assert (await alice.assistants.get(aid))["name"] == keyed.alice["assistant"]["name"]
    assert cid in [c["cron_id"] for c in await alice.crons.search(limit=100)]


async def test_another_identity_sees_only_the_system_assistants(keyed, connect):
    bob = connect(keyed.url, api_key=keyed.keys["bob"])
    aid = keyed.alice["assistant"]["assistant_id"]
    with pytest.raises(NotFoundError):
        await bob.assistants.get(aid)
    found = await bob.assistants.search(limit=100)
    assert {"echo", "steps"} <= {a["graph_id"] for a in found}
    assert all(a["metadata"].get("created_by") == "system" for a in found), found
    assert await bob.assistants.count() == len(found)
    async with httpx.AsyncClient(base_url=keyed.url, headers={"x-api-key": keyed.keys["bob"]}) as h:
        r = await h.post("/assistants/search", json={"limit": 100})
        assert r.headers["x-pagination-total"] == str(len(found))
    # System assistants are usable by everyone.
    assert (await bob.assistants.get("echo"))["graph_id"] == "echo"
    values = await wait_echo(bob, None)
    assert values["messages"][-1]["content"] == "echo: hi"

    alice = connect(keyed.url, api_key=keyed.keys["alice"])
    mine = await alice.assistants.search(limit=100)
    assert sorted(a["assistant_id"] for a in mine) == sorted([aid] + [a["assistant_id"] for a in found])


async def test_another_identity_sees_no_crons(keyed, connect):
    bob = connect(keyed.url, api_key=keyed.keys["bob"])
    assert await bob.crons.search() == []
    assert await bob.crons.count() == 0
    async with httpx.AsyncClient(base_url=keyed.url, headers={"x-api-key": keyed.keys["bob"]}) as h:
        r = await h.post("/runs/crons/search", json={})
        assert r.status_code == 200 and r.headers["x-pagination-total"] == "0"

    alice = connect(keyed.url, api_key=keyed.keys["alice"])
    assert [c["cron_id"] for c in await alice.crons.search()] == [keyed.alice["cron"]["cron_id"]]
    assert await alice.crons.count() == 1


async def test_each_identity_has_its_own_store(keyed, connect):
    ns = keyed.alice["namespace"]
    bob = connect(keyed.url, api_key=keyed.keys["bob"])
    assert await bob.store.get_item(ns, key="k") is None
    assert (await bob.store.list_namespaces())["namespaces"] == []
    assert (await bob.store.search_items(ns[:1]))["items"] == []

    # The same namespace and key under another identity is another item.
    carol = connect(keyed.url, api_key=keyed.keys["carol"])
    await carol.store.put_item(ns, key="k", value={"by": "carol"})
    assert (await carol.store.get_item(ns, key="k"))["value"] == {"by": "carol"}

    alice = connect(keyed.url, api_key=keyed.keys["alice"])
    item = await alice.store.get_item(ns, key="k")
    assert item["namespace"] == ns and item["value"] == {"by": "alice"}
    # Namespaces come back as written, without the identity's hidden prefix.
    assert (await alice.store.list_namespaces())["namespaces"] == [ns]
    assert [i["namespace"] for i in (await alice.store.search_items(ns[:1]))["items"]] == [ns]


async def test_an_idempotency_key_never_replays_another_identitys_answer(keyed, connect):
    key = {"Idempotency-Key": marker()}
    alice = connect(keyed.url, api_key=keyed.keys["alice"], headers=key)
    carol = connect(keyed.url, api_key=keyed.keys["carol"], headers=key)
    first = await alice.threads.create()
    assert (await alice.threads.create())["thread_id"] == first["thread_id"]  # replayed for alice
    theirs = await carol.threads.create()
    assert theirs["thread_id"] != first["thread_id"]
    assert theirs["metadata"]["owner"] == f"key:{keyed.ids['carol']}"


# ---------------------------------------------------------------------- JWTs


@dataclass
class JwtServer:
    url: str
    algorithm: str
    signing_key: object  # what valid tokens are signed with
    other_key: object  # a key of the same kind that the server does not trust
    public_pem: bytes | None  # the ES256 server's public key

    def token(self, key: object = None, **claims) -> str:
        """A valid token (fresh `sub`, `exp` in 5 minutes, the server's aud and iss,
        permission `write`) with `claims` changed; a claim given as None is left out."""
        payload = {
            "sub": f"user-{marker()}",
            "exp": int(time.time()) + 300,
            "aud": "e2e",
            "iss": "e2e-issuer",
            "permissions": ["write"],
            **claims,
        }
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode(payload, key or self.signing_key, algorithm=self.algorithm)


def _es256_key_pair():
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, pem


@pytest.fixture(scope="module", params=["HS256", "ES256"])
def jwt_server(request):
    """A server accepting JWTs only, owner scoping, `threads:create` needing permission `write`."""
    block: dict = {"algorithm": request.param, "issuer": "e2e-issuer"}
    env, files = {}, {}
    if request.param == "HS256":
        secret = f"e2e-jwt-secret-{marker()}"  # the server wants at least 32 bytes
        env["E2E_AUTH_JWT_SECRET"] = secret
        block.update(secret_env="E2E_AUTH_JWT_SECRET", audience="e2e")
        signing_key, other_key, pem = secret, f"another-secret-{marker()}", None
    else:
        signing_key, pem = _es256_key_pair()
        other_key, _ = _es256_key_pair()
        files["jwt-public.pem"] = pem
        # The key file is relative to the config file; the audience in its list form.
        block.update(public_key_file="jwt-public.pem", audience=["another-api", "e2e"])
    config = {"auth": {"jwt": block, "scoping": "owner", "permissions": {"threads:create": "write"}}}
    with own_server(config, env=env, files=files) as url:
        yield JwtServer(url, request.param, signing_key, other_key, pem)


def _bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


async def test_jwt_valid_token_is_accepted_and_its_sub_owns_what_it_makes(jwt_server, connect):
    sub = f"user-{marker()}"
    client = connect(jwt_server.url, headers=_bearer(jwt_server.token(sub=sub)))
    thread = await client.threads.create()
    assert thread["metadata"]["owner"] == f"jwt:{sub}"
    assert [t["thread_id"] for t in await client.threads.search()] == [thread["thread_id"]]


@pytest.mark.parametrize(
    "make, message",
    [
        # 5 minutes ago: beyond the default 30 s leeway.
        (lambda s: s.token(exp=int(time.time()) - 300), "Token expired"),
        (lambda s: s.token(aud="someone-else"), "Token audience not accepted"),
        (lambda s: s.token(iss="another-issuer"), "Token issuer not accepted"),
        (lambda s: s.token(key=s.other_key), "Token signature is invalid"),
        (lambda s: s.token(sub=None), "Token lacks the identity claim 'sub'"),
    ],
    ids=["expired", "wrong-audience", "wrong-issuer", "bad-signature", "no-sub"],
)
async def test_jwt_refused_tokens_are_401_with_the_reason(jwt_server, connect, make, message):
    with pytest.raises(AuthenticationError) as raised:
        await connect(jwt_server.url, headers=_bearer(make(jwt_server))).threads.search()
    assert raised.value.status_code == 401
    assert raised.value.body["message"] == message
    assert f'error_description="{message}"' in raised.value.response.headers["www-authenticate"]


async def test_jwt_token_of_another_algorithm_is_refused(jwt_server, connect):
    claims = {"sub": "mallory", "exp": int(time.time()) + 300, "aud": "e2e", "iss": "e2e-issuer"}
    if jwt_server.public_pem is None:
        token = jwt.encode(claims, _es256_key_pair()[0], algorithm="ES256")
    else:
        # Algorithm confusion: HS256 keyed with the server's own public PEM (PyJWT refuses
        # to do this, so the token is put together by hand).
        b64 = lambda raw: base64.urlsafe_b64encode(raw).rstrip(b"=").decode()  # noqa: E731
        signed = f"{b64(json.dumps({'alg': 'HS256', 'typ': 'JWT'}).encode())}.{b64(json.dumps(claims).encode())}"
        token = f"{signed}.{b64(hmac.new(jwt_server.public_pem, signed.encode(), hashlib.sha256).digest())}"
    with pytest.raises(AuthenticationError) as raised:
        await connect(jwt_server.url, headers=_bearer(token)).threads.search()
    assert raised.value.body["message"] == "Token algorithm not accepted"


async def test_jwt_two_subs_are_isolated(jwt_server, connect):
    one = connect(jwt_server.url, headers=_bearer(jwt_server.token()))
    two = connect(jwt_server.url, headers=_bearer(jwt_server.token()))
    thread = await one.threads.create()
    await one.store.put_item(["notes"], key="k", value={"v": 1})
    with pytest.raises(NotFoundError):
        await two.threads.get(thread["thread_id"])
    assert await two.threads.search() == []
    assert await two.threads.count() == 0
    assert await two.store.get_item(["notes"], key="k") is None
    assert (await one.threads.get(thread["thread_id"]))["thread_id"] == thread["thread_id"]
    assert (await one.store.get_item(["notes"], key="k"))["value"] == {"v": 1}


async def test_jwt_without_the_required_permission_is_403(jwt_server, connect):
    reader = connect(jwt_server.url, headers=_bearer(jwt_server.token(permissions=None)))
    with pytest.raises(PermissionDeniedError) as raised:
        await reader.threads.create()
    assert "'write'" in raised.value.body["message"]
    assert await reader.threads.search() == []  # reading needs no permission
    # The permissions claim may also be a space-separated string, as `scope` is.
    writer = connect(jwt_server.url, headers=_bearer(jwt_server.token(permissions="read write")))
    assert (await writer.threads.create())["status"] == "idle"


@pytest.mark.parametrize("claim", ["aud", "iss"])
async def test_jwt_token_without_the_configured_claim_is_refused(jwt_server, connect, claim):
    with pytest.raises(AuthenticationError):
        await connect(jwt_server.url, headers=_bearer(jwt_server.token(**{claim: None}))).threads.search()
