"""What the stack serves, read from its /openapi.json: tests of routes not served yet skip."""

from __future__ import annotations

from typing import Any, Dict, Optional, cast

import pytest


def require_route(openapi: Dict[str, Any], method: str, path: str) -> None:
    """Skips the test until the stack serves the route, so that it starts running by itself once
    the route lands (and shows as skipped, with the reason, until then)."""
    if method.lower() not in openapi.get("paths", {}).get(path, {}):
        pytest.skip(f"route not served yet: {method.upper()} {path}")


def schema_at(openapi: Dict[str, Any], schema: Any) -> Dict[str, Any]:
    """A schema with its $ref followed."""
    found = _object(schema)
    while found is not None and "$ref" in found:
        node: Any = openapi
        for part in found["$ref"].lstrip("#/").split("/"):
            node = node[part]
        found = _object(node)
    return found if found is not None else {}


def _object(value: object) -> Optional[Dict[str, Any]]:
    return cast(Dict[str, Any], value) if isinstance(value, dict) else None


def request_properties(openapi: Dict[str, Any], method: str, path: str) -> Dict[str, Any]:
    """The top-level properties of a route's JSON request body, as the OpenAPI document has it."""
    operation = openapi.get("paths", {}).get(path, {}).get(method.lower(), {})
    content = operation.get("requestBody", {}).get("content", {})
    schema = schema_at(openapi, content.get("application/json", {}).get("schema"))
    properties: Dict[str, Any] = dict(schema.get("properties", {}))
    for part in schema.get("allOf", []) + schema.get("anyOf", []) + schema.get("oneOf", []):
        properties.update(schema_at(openapi, part).get("properties", {}))
    return properties
