import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """The whole run gets its own vectors cache, never the user's."""
    before = os.environ.get("ATTNCLI_CACHE_DIR")
    os.environ["ATTNCLI_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        del os.environ["ATTNCLI_CACHE_DIR"]
    else:
        os.environ["ATTNCLI_CACHE_DIR"] = before
