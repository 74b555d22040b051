"""bot/kube/answers.py on its own: the shape an answer must have, and what is said of one that lacks it.

`judge` is a pure function of the answer's bytes; the hostile-server tests send it the common garbage
(empty bodies, arrays, lists without items) through the real transport. These are the discovery
documents and objects broken in the other ways, each refused with its own words.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.kube.answers import Malformed, Shape, judge, shape_of

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


@pytest.mark.parametrize(
    ("path", "content_type", "expected"),
    [
        ("/api", AGGREGATED, (Shape.AGGREGATED, None)),
        ("/apis", "application/json; g=apidiscovery.k8s.io; v=v2; as=APIGroupDiscoveryList", (Shape.AGGREGATED, None)),
        ("/api", "application/json", (Shape.VERSIONS, None)),
        ("/apis", "", (Shape.GROUPS, None)),
        ("/apis/example.com", "", (Shape.DOCUMENT, None)),  # the group's own document
        ("/apis/example.com/v1", "", (Shape.RESOURCES, None)),
        ("/apis/example.com/v1/namespaces/ns/widgets", "", (Shape.LIST, None)),
        ("/apis/example.com/v1/namespaces/ns/widgets/a%2Fb?x=1", "", (Shape.OBJECT, "a/b")),
        ("/api/v1/namespaces/ns/pods/web-0/log", "", (Shape.DOCUMENT, None)),  # a subresource
        ("/version", "", (Shape.DOCUMENT, None)),
    ],
)
def test_the_shape_follows_from_the_path_and_the_content_type(
    path: str, content_type: str, expected: tuple[Shape, str | None]
) -> None:
    assert shape_of(path, content_type) == expected


def _refusal(doc: Any, path: str, **kwargs: Any) -> str:
    with pytest.raises(Malformed) as raised:
        judge(json.dumps(doc).encode(), path=path, **kwargs)
    return str(raised.value)


@pytest.mark.parametrize(
    ("path", "doc", "words"),
    [
        ("/api", {"kind": "APIGroupList", "groups": []}, "kind 'APIGroupList' where a discovery document APIVersions"),
        ("/api", {"kind": "APIVersions"}, "an APIVersions without a `versions` array"),
        ("/api", {"kind": "APIVersions", "versions": ["v1", 1]}, "an APIVersions whose `versions` are not all strings"),
        ("/apis", {"kind": "APIGroupList", "groups": ["apps"]}, "an APIGroupList whose `groups` are not all objects"),
        (
            "/apis",
            {"kind": "APIGroupList", "groups": [{"name": "apps"}, {"versions": []}]},
            "an APIGroupList with an entry of `groups` without a name",
        ),
        (
            "/apis/example.com/v1",
            {"kind": "APIResourceList", "resources": [{"name": "widgets"}, {"name": "widgets"}]},
            "an APIResourceList that holds widgets twice in `resources`",
        ),
        ("/apis", {"groups": []}, "no kind where a discovery document APIGroupList was expected"),
    ],
)
def test_a_broken_discovery_document_is_refused_saying_what_is_wrong(path: str, doc: Any, words: str) -> None:
    refusal = _refusal(doc, path)
    assert refusal.startswith(f"the API server answered 200 with {words}"), refusal
    assert refusal.endswith(f" for GET {path}")


def test_a_well_formed_discovery_document_is_returned_as_it_came() -> None:
    doc = {"kind": "APIGroupList", "groups": [{"name": "apps"}, {"name": "example.com"}]}
    assert judge(json.dumps(doc).encode(), path="/apis") == doc
    aggregated = {"kind": "APIGroupDiscoveryList", "items": [{"metadata": {"name": ""}}]}
    assert judge(json.dumps(aggregated).encode(), path="/apis", content_type=AGGREGATED) == aggregated


def test_a_list_without_items_or_of_another_kind_is_refused() -> None:
    path = "/api/v1/namespaces/ns/pods"
    assert _refusal({"kind": "PodList"}, path) == (
        f"the API server answered 200 with a PodList without an `items` array for GET {path}"
    )
    assert "kind 'SecretList' where a list (PodList) was expected" in _refusal(
        {"kind": "SecretList", "items": []}, path, kind="PodList"
    )


@pytest.mark.parametrize(
    ("doc", "kind", "words"),
    [
        ({"kind": "Namespace"}, None, "an object without metadata"),
        (
            {"kind": "ConfigMap", "metadata": {"name": "ns"}},
            "Namespace",
            "kind 'ConfigMap' where a Namespace was expected",
        ),
        ({"kind": "Namespace", "metadata": {"name": "other"}}, "Namespace", "an object named 'other' where 'ns' was"),
    ],
)
def test_an_object_without_metadata_of_another_kind_or_another_name_is_refused(
    doc: dict[str, Any], kind: str | None, words: str
) -> None:
    assert words in _refusal(doc, "/api/v1/namespaces/ns", kind=kind, status=200)


def test_an_object_of_the_kind_and_name_asked_is_returned() -> None:
    doc = {"kind": "Namespace", "metadata": {"name": "ns"}}
    assert judge(json.dumps(doc).encode(), path="/api/v1/namespaces/ns", kind=("Namespace", "Status")) == doc


def test_a_shape_given_by_the_caller_is_the_one_judged() -> None:
    # a path that would be an object, asked as a list: judged as a list
    doc = {"kind": "PodList", "items": [{"metadata": {"name": "a"}}]}
    assert judge(json.dumps(doc).encode(), path="/api/v1/namespaces/ns", shape=Shape.LIST) == doc
    assert _refusal(None, "/version") == "the API server answered 200 with null for GET /version"
    assert _refusal(True, "/version", status=203).startswith("the API server answered 203 with a JSON boolean")
