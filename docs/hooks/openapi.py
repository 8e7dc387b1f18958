"""MkDocs hook: the HTTP API reference, generated at build time from the app's own OpenAPI.

`create_app(...).openapi()` is the schema `assay serve` serves at `/openapi.json` (building the app
opens no store). The hook writes it into the site as `openapi.json` and replaces the line
`<!-- openapi-reference -->` in `api.md` with one section per route (summary, description, who may
call it, parameters, request body, responses) and one per schema (fields, types, descriptions).
So the page cannot drift from the code: a route added, renamed or re-documented shows up at the
next build, and tests/test_docs.py checks every path is on the page.
"""

from __future__ import annotations

import json
from typing import Any

MARK = "<!-- openapi-reference -->"
METHODS = ("get", "post", "put", "patch", "delete")

_schema: dict[str, Any] | None = None


def openapi() -> dict[str, Any]:
    global _schema
    if _schema is None:
        from assay.web.app import Settings, create_app

        _schema = create_app(Settings(db_url=None, secret=b"docs-build-" * 4)).openapi()
    return _schema


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type(schema: dict[str, Any]) -> str:
    """A short, readable type: `string`, `integer ≥ 1`, `[Board](#schema-board)`, `array of …`."""
    if not schema:
        return "any"
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{name}](#schema-{name.lower()})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            parts = [_type(s) for s in schema[key]]
            return " or ".join(dict.fromkeys(parts))
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _type(schema["allOf"][0])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema and isinstance(schema["additionalProperties"], dict):
        return f"object of {_type(schema['additionalProperties'])}"
    bounds = []
    for key, sign in (("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥"), ("maxLength", "length ≤")):
        if key in schema:
            bounds.append(f"{sign} {schema[key]}")
    return str(kind) + (f" ({', '.join(bounds)})" if bounds else "")


def _operation(path: str, method: str, op: dict[str, Any]) -> list[str]:
    out = [f"#### `{method.upper()} {path}`", ""]
    if op.get("summary"):
        out += [op["summary"].rstrip(".") + ".", ""]
    if op.get("description"):
        out += [op["description"].strip(), ""]
    security = [name for req in op.get("security", []) for name in req]
    out += [f"**Who:** {', '.join(f'`{s}`' for s in security) if security else 'anyone (no key)'}", ""]
    params = op.get("parameters", [])
    if params:
        out += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in params:
            desc = p.get("description") or p.get("schema", {}).get("description", "")
            out.append(f"| `{p['name']}` | {p['in']} | {_type(p.get('schema', {}))} | "
                       f"{'yes' if p.get('required') else 'no'} | {_cell(desc)} |")
        out.append("")
    body = op.get("requestBody")
    if body:
        kinds = body.get("content", {})
        for media, content in kinds.items():
            out += [f"**Body** (`{media}`): {_type(content.get('schema', {}))}", ""]
    out += ["| status | meaning | body |", "|---|---|---|"]
    for status, resp in sorted(op.get("responses", {}).items(), key=lambda item: str(item[0])):
        content = resp.get("content", {})
        shapes = ", ".join(f"{_type(c.get('schema', {}))} (`{m}`)" for m, c in content.items()) or "none"
        out.append(f"| {status} | {_cell(resp.get('description', ''))} | {shapes} |")
    out.append("")
    return out


def _schema_section(name: str, schema: dict[str, Any]) -> list[str]:
    out = [f"#### {name} {{#schema-{name.lower()}}}", ""]
    if schema.get("description"):
        out += [schema["description"].strip(), ""]
    props = schema.get("properties", {})
    if props:
        required = set(schema.get("required", []))
        out += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, sub in props.items():
            out.append(f"| `{field}` | {_type(sub)} | {'yes' if field in required else 'no'} | "
                       f"{_cell(sub.get('description', ''))} |")
    else:
        out.append(f"Type: {_type(schema)}")
    out.append("")
    return out


def reference(schema: dict[str, Any]) -> str:
    """The Markdown of every route, grouped by tag in the order they first appear, then every schema."""
    info = schema.get("info", {})
    out = [f"OpenAPI {schema.get('openapi', '')}, *{info.get('title', '')}* version {info.get('version', '')}; "
           "the same document as [openapi.json](openapi.json) and a running server's `/openapi.json`.", ""]
    groups: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in schema.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                tag = (item[method].get("tags") or ["other"])[0]
                groups.setdefault(tag, []).append((path, method, item[method]))
    for tag, ops in groups.items():
        out += [f"### {tag.capitalize()}", ""]
        for path, method, op in ops:
            out += _operation(path, method, op)
    schemes = schema.get("components", {}).get("securitySchemes", {})
    if schemes:
        out += ["### Credentials", "", "| name | kind | description |", "|---|---|---|"]
        for name, scheme in schemes.items():
            kind = scheme.get("scheme") or scheme.get("type", "")
            out.append(f"| `{name}` | {kind} {scheme.get('in', '')} {scheme.get('name', '')} | "
                       f"{_cell(scheme.get('description', ''))} |")
        out.append("")
    out += ["### Schemas", ""]
    for name, sub in sorted(schema.get("components", {}).get("schemas", {}).items()):
        out += _schema_section(name, sub)
    return "\n".join(out)


# -- the MkDocs events --------------------------------------------------------------------------

def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, "openapi.json", content=json.dumps(openapi(), indent=2) + "\n"))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == "api.md":
        if MARK not in markdown:
            raise ValueError(f"api.md lost its {MARK} line: the generated reference has nowhere to go")
        markdown = markdown.replace(MARK, reference(openapi()))
    return markdown
