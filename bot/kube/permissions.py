"""The Kubernetes permissions diagnosis needs: exactly what `bot.kube.collecting` reads, and nothing
that writes. Per purpose, the rules that allow it.

The Helm chart's read-only ClusterRole (helm/nsstuck/templates/rbac-read.yaml) is written by hand from
this table, with a comment per rule; a test holds the two equal, and another runs diagnoses and
scans against the test API server and checks every request they make against this table. The
writes of remediation are `bot.remediation.permissions`.

The one broad rule is `list` on every resource: the namespace controller waits for every namespaced
type (custom resources included, types installed after nsstuck too) to be empty, so the evidence of
what remains has to list them all. RBAC cannot narrow a `list` to metadata, so this allows reading
the Secrets and ConfigMaps of a terminating namespace whole; nsstuck asks for their metadata only
(`bot.kube.collecting`), so their values are never sent to it. The narrower rules after it are
covered by it; they stay so that each read says what it is for, and keep working if an operator
removes the broad rule (diagnoses then report the types they could not list as gaps).
"""

from __future__ import annotations

from bot.domain.access import Request, Rule, allowed_by, parse_request, unique

READS: dict[str, tuple[Rule, ...]] = {
    # the namespace under diagnosis (and its follow-ups), and the scan of every namespace for digests
    "namespaces": (Rule(("",), ("namespaces",), ("get", "list")),),
    # every namespaced type in the terminating namespace (what NamespaceContentRemaining counts), or in the
    # Active one whose deletion is predicted (what the namespace controller will delete)
    "namespace contents": (Rule(("*",), ("*",), ("list",)),),
    # the objects of a terminating namespace that are being deleted (of an Active one: that carry a
    # finalizer), read whole (their status, conditions and managers show whether a controller works on
    # them); never Secrets and ConfigMaps, although RBAC cannot say so
    "deleting objects": (Rule(("*",), ("*",), ("get",)),),
    # discovery: which group versions serve and which fail (most clusters grant it to every
    # authenticated user through system:discovery already)
    "discovery": (Rule(non_resource_urls=("/api", "/api/*", "/apis", "/apis/*"), verbs=("get",)),),
    # the server's version: which namespace-deletion behaviour (conditions, ordered deletion) it has
    "version": (Rule(non_resource_urls=("/version",), verbs=("get",)),),
    # aggregated APIs whose outage blocks namespace deletion
    "aggregated APIs": (Rule(("apiregistration.k8s.io",), ("apiservices",), ("list",)),),
    # admission webhooks that may fail closed on deletes
    "admission webhooks": (
        Rule(
            ("admissionregistration.k8s.io",),
            ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"),
            ("list",),
        ),
    ),
    # ValidatingAdmissionPolicies and their bindings: which one a namespace condition quotes as denying
    "admission policies": (
        Rule(
            ("admissionregistration.k8s.io",),
            ("validatingadmissionpolicies", "validatingadmissionpolicybindings"),
            ("list",),
        ),
    ),
    # the types of a group whose discovery fails, and conversion webhooks
    "custom resource definitions": (Rule(("apiextensions.k8s.io",), ("customresourcedefinitions",), ("list",)),),
    # which controller (if any) still runs for a finalizer or a webhook
    "controllers": (Rule(("apps",), ("deployments", "statefulsets", "daemonsets"), ("list",)),),
    # who runs a finalizer's controller that neither the finalizer catalogue nor its name finds
    # (bot.diagnosis.owners): the roles that let a service account update the resource, with their bindings,
    # and OLM's ClusterServiceVersions (the CRDs each owns, the deployments it installs)
    "controller discovery": (
        Rule(
            ("rbac.authorization.k8s.io",),
            ("clusterroles", "clusterrolebindings", "roles", "rolebindings"),
            ("list",),
        ),
        Rule(("operators.coreos.com",), ("clusterserviceversions",), ("list",)),
    ),
    # GitOps owners (issue 38 §5): the Argo CD Applications, Flux Kustomizations and HelmReleases that may
    # re-create the namespace's content, listed only when its objects carry Argo CD's or Flux's marks
    "gitops owners": (
        Rule(("argoproj.io",), ("applications",), ("list",)),
        Rule(("kustomize.toolkit.fluxcd.io",), ("kustomizations",), ("list",)),
        Rule(("helm.toolkit.fluxcd.io",), ("helmreleases",), ("list",)),
    ),
    # the Service behind an APIService or a webhook, its endpoints and its pods
    "backends": (
        Rule(("",), ("services", "endpoints"), ("get",)),
        Rule(("discovery.k8s.io",), ("endpointslices",), ("list",)),
        Rule(("",), ("pods",), ("list",)),
    ),
    # the controller's own words (issue 37 §2): the recent log lines of the pods of a live controller whose
    # objects stood still past the bound, only those naming the objects kept (redacted); a cluster's
    # `evidence.controller_logs: false` turns the read off
    "controller logs": (Rule(("",), ("pods/log",), ("get",)),),
    # the node of a pod that is being deleted (or, in an Active namespace, will be): gone, or NotReady?
    "nodes": (Rule(("",), ("nodes",), ("get",)),),
}

READ_PERMISSIONS: tuple[Rule, ...] = unique(rule for rules in READS.values() for rule in rules)


def read_allowed(method: str, path: str, query: str = "") -> bool:
    """Whether the read-only permissions allow this request."""
    return allowed_by(READ_PERMISSIONS, parse_request(method, path, query))


def rules_used_by(request: Request) -> tuple[Rule, ...]:
    """The rules of READ_PERMISSIONS that allow a request (a test checks each rule is needed)."""
    return tuple(rule for rule in READ_PERMISSIONS if rule.allows_request(request))


# diagnose_as: requester (issue 39): nsstuck asks the cluster whether a person may `get` a namespace with
# a SubjectAccessReview (bot.kube.reviewing.subject_may_get_namespace). The chart grants it only where
# its values turn the mode on (rbac.requesterReviews)
REQUESTER_REVIEWS: tuple[Rule, ...] = (Rule(("authorization.k8s.io",), ("subjectaccessreviews",), ("create",)),)
