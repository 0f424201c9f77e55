"""The local OpenAI-compatible embeddings endpoint, driven through the real ``openai`` client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from caap._embeddings import get_embedder
from caap.embedding_server import EmbeddingServer

openai = pytest.importorskip("openai", reason="the openai package is in the dev extra")


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddingServer]:
    with EmbeddingServer() as s:
        yield s


def _post(server: EmbeddingServer, body: Any) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        server.base_url + "/embeddings",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_openai_client_gets_the_models_vectors(server: EmbeddingServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    texts = ["Alice drinks oat milk.", "爱丽丝每天早上喝绿茶。"]
    # The client asks for base64 by default and decodes it; both formats must agree.
    default = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts)
    as_float = client.embeddings.create(
        model="all-MiniLM-L6-v2", input=texts, encoding_format="float"
    )
    want = get_embedder().encode(texts)
    for resp in (default, as_float):
        assert [d.index for d in resp.data] == [0, 1]
        got = np.array([d.embedding for d in resp.data], dtype=np.float32)
        assert got.shape == (2, server.dimension)
        np.testing.assert_allclose(got, want, atol=1e-5)
    assert default.model == "all-MiniLM-L6-v2"


def test_single_string_input_and_models_listing(server: EmbeddingServer) -> None:
    status, body = _post(server, {"input": "one text", "model": "x"})
    assert status == 200
    assert len(body["data"]) == 1 and len(body["data"][0]["embedding"]) == server.dimension
    assert body["model"] == "x"
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list().data] == ["all-MiniLM-L6-v2"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "input"),
        ({"input": []}, "input"),
        ({"input": [1, 2, 3]}, "input"),
        ({"input": "x", "encoding_format": "int8"}, "encoding_format"),
        ([1, 2], "JSON object"),
    ],
)
def test_bad_requests_name_the_field(server: EmbeddingServer, body: Any, field: str) -> None:
    status, reply = _post(server, body)
    assert status == 400
    assert field in reply["error"]["message"]
    assert reply["error"]["type"] == "invalid_request_error"


def test_openai_client_raises_on_bad_input(server: EmbeddingServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="input"):
        client.embeddings.create(model="m", input=[])


def test_unknown_route_is_404(server: EmbeddingServer) -> None:
    req = urllib.request.Request(server.base_url + "/chat/completions", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=10)
    assert info.value.code == 404


def test_port_is_validated_and_stop_is_idempotent() -> None:
    with pytest.raises(ValueError, match="port"):
        EmbeddingServer(port=70000)
    s = EmbeddingServer().start()
    url = s.base_url
    s.stop()
    s.stop()
    with pytest.raises(RuntimeError, match="not running"):
        _ = s.port
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/models", timeout=5)
