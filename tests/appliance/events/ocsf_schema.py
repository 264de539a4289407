"""The OCSF validator the tests use: the schema server's own 1.8.0 export, offline.

``ocsf-json-schema`` ships the OCSF schema server's export of every release
(``schema.ocsf.io/1.8.0/export/schema``; the OCSF schema is Apache-2.0, the
package MIT) and turns a class plus the profiles a record declares into JSON
Schema draft 2020-12 (objects closed: an attribute OCSF does not define is an
error; enums, required attributes and "at least one of" constraints
enforced).  ``jsonschema`` then validates the record.  Nothing is fetched.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jsonschema
from ocsf_json_schema import OcsfJsonSchemaEmbedded, get_ocsf_schema

from appliance.events._ocsf import OCSF_VERSION


@cache
def _schema() -> OcsfJsonSchemaEmbedded:
    return OcsfJsonSchemaEmbedded(get_ocsf_schema(version=OCSF_VERSION))


@cache
def _validator(class_uid: int, profiles: tuple[str, ...]) -> jsonschema.Draft202012Validator:
    name = _schema().lookup_class_name_from_uid(class_uid=class_uid)
    schema = _schema().get_class_schema(class_name=name, profiles=list(profiles))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def ocsf_problems(record: dict[str, Any]) -> list[str]:
    """Every way ``record`` breaks OCSF 1.8.0 for its class and declared profiles."""
    profiles = tuple(sorted(record.get("metadata", {}).get("profiles", [])))
    validator = _validator(int(record["class_uid"]), profiles)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(record)'}: {e.message[:300]}"
            for e in validator.iter_errors(record)]
