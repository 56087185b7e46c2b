"""Deterministic embeddings for crates/service-server/tests/python_embed.rs: each word
adds one to a bucket chosen by its CRC-32, as a LangChain Embeddings object would
answer (async and sync), so the test knows which item a query ranks first."""

import zlib

DIMS = 64


def _vector(text: str) -> list[float]:
    vector = [0.0] * DIMS
    for word in text.lower().split():
        vector[zlib.crc32(word.encode()) % DIMS] += 1.0
    return vector


class WordBuckets:
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [_vector(text) for text in texts]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return _vector(text)


embeddings = WordBuckets()

# Not an embeddings object: the boot must stop naming it.
not_embeddings = 42
