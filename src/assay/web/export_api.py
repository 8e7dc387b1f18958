"""The public export of a suite version, for anyone to download and verify (issue 23, item 2).

`GET /api/suites/{key}/{version}/export` answers a gzipped tar (`application/gzip`) holding one
directory, `assay-export-KEY-VERSION/`: the public export `assay export --public --suite KEY`
writes, scoped to that version's board (`service.exports.public_archive`). Unpack it and run
`assay verify assay-export-KEY-VERSION`: it recomputes every digest and every board figure from
the rows and exits 0, or names the file and line that does not add up. The archive is built on
disk in a temporary directory and streamed from there (memory stays flat), then removed. An
internal, unlisted or missing suite version is a 404, as everywhere in the public API.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from assay.service import exports
from assay.service.actors import Actor
from assay.store.db import Store
from assay.web.deps import get_store, public_actor
from assay.web.schemas import error_responses

router = APIRouter(prefix="/api", responses=error_responses(429, 500))


@router.get("/suites/{key}/{version}/export", tags=["boards"],
            summary="A suite version's public export (tar.gz): check it with `assay verify DIR`",
            response_class=FileResponse,
            responses={200: {"content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}}},
                       **error_responses(404)})
def public_export(key: str, version: str, store: Store = Depends(get_store),
                  actor: Actor = Depends(public_actor)) -> Any:
    scratch = Path(tempfile.mkdtemp(prefix="assay-public-export-"))
    try:
        archive = exports.public_archive(store, key, version, scratch, actor=actor)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return FileResponse(archive, media_type="application/gzip", filename=archive.name,
                        background=BackgroundTask(shutil.rmtree, scratch, ignore_errors=True))
