"""The web shell: a FastAPI app over `service/`, like the CLI, adding no rule of its own.

- `app.create_app(settings)` builds the app; `assay serve` runs it on uvicorn.
- `api` the JSON API for submitters (API keys) and the public; `agent_api` remote play (agent
  keys); `pages` the server-rendered board pages (Jinja2, complete without JavaScript).
- `deps` the dependencies every route shares: the store, the caller's `Actor` from its key.
"""
