"""Meshes, policy and secrets: Istio (its old operator and Sail), Kiali, Kyverno, Gatekeeper, cert-manager
and External Secrets. (Linkerd defines no finalizer: see `PROJECTS_WITHOUT_FINALIZERS`.)"""

from __future__ import annotations

from bot.diagnosis.catalogue_model import CatalogueEntry, Lease, Owner, RunsIn, Runtime, Workload

# --- Istio --------------------------------------------------------------------------------------------------
# The in-cluster Istio operator (IstioOperator CRs) is gone from istio/istio (removed in 1.24); its
# Deployment and Lease were not read, so only the marker of today's catalogue identifies it.
ISTIO_OPERATOR = Runtime(RunsIn.WORKLOAD, images=("istio/operator",), leases=None)
# istio-ecosystem/sail-operator:chart/values.yaml (Deployment sail-operator, image
# quay.io/sail-dev/sail-operator); cmd/main.go:185 LeaderElectionID "sail-operator-lock", in the pod's
# namespace (sail-operator by the usual install)
SAIL_OWNER = Owner("the Sail operator", markers=("sail-operator", "sailoperator"))
SAIL = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "sail-operator", "sail-operator"),),
    images=("sail-operator",),
    leases=(Lease("sail-operator-lock", "sail-operator"),),
)

# --- Kiali --------------------------------------------------------------------------------------------------
# kiali/kiali-operator:watches.yaml (an Ansible operator): finalizer kiali.io/finalizer on Kiali and
# OSSMConsole CRs, cleanup playbooks kiali-remove.yml and ossmconsole-remove.yml. Its Deployment and
# Lease were not read.
KIALI = Runtime(RunsIn.WORKLOAD, images=("kiali/kiali-operator",), leases=None)

# --- Kyverno ------------------------------------------------------------------------------------------------
# kyverno/kyverno:cmd/kyverno/main.go:619-622 Lease "kyverno" and cmd/cleanup-controller/main.go:241-244
# Lease "kyverno-cleanup-controller", both in Kyverno's namespace. Its webhook-cleanup finalizers were
# added (only with the chart's webhooksCleanup.autoDeleteWebhooks.enabled, default false) from commit
# c0d6eaddb3 (#10782, chart 3.3.0) until cce31df0a6 "remove finalizers and workarounds around uninstall"
# (#15260, chart 3.8.0), by pkg/controllers/webhook/cleanup.go WebhookCleanupSetup on Kyverno's own
# Deployment, ServiceAccount, Role, RoleBinding and ClusterRole; WebhookCleanupHandler removed them when
# the controller shut down, after deleting its webhook configurations.
KYVERNO_OWNER = Owner("Kyverno", markers=("kyverno",))
KYVERNO = Runtime(
    RunsIn.WORKLOAD,
    workloads=(
        Workload("Deployment", "kyverno-admission-controller", "kyverno"),
        Workload("Deployment", "kyverno-cleanup-controller", "kyverno"),
    ),
    images=("kyverno/kyverno", "kyverno/cleanup-controller"),
    leases=(Lease("kyverno", "kyverno"), Lease("kyverno-cleanup-controller", "kyverno")),
)
KYVERNO_SOURCE = "kyverno/kyverno:cmd/kyverno/main.go (before cce31df0a6)"
_KYVERNO_RESOURCES = (
    ("apps", "deployments"),
    ("", "serviceaccounts"),
    ("rbac.authorization.k8s.io", "roles"),
    ("rbac.authorization.k8s.io", "rolebindings"),
    ("rbac.authorization.k8s.io", "clusterroles"),
)

# --- Gatekeeper ---------------------------------------------------------------------------------------------
# open-policy-agent/gatekeeper: no current release removes these. finalizers.gatekeeper.sh/sync went in
# f7494cbbae "Remove the sync finalizer (#369)" (v3.1.0); the removal code for the other three, still in
# v3.14.0 (pkg/controller/config/config_controller.go:43, constraint/constraint_controller.go:56,
# constrainttemplate/constrainttemplate_controller.go:56), went in f905e30439 (#3085, v3.15.0).
GATEKEEPER = Runtime(RunsIn.RETIRED, "Gatekeeper 3.14 and older", leases=())

# --- cert-manager -------------------------------------------------------------------------------------------
# cert-manager/cert-manager:cmd/controller/app/controller.go:399 lockName "cert-manager-controller",
# namespace kube-system by default (internal/apis/config/shared/v1alpha1/defaults.go:29)
CERT_MANAGER = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "cert-manager", "cert-manager"),),
    images=("jetstack/cert-manager-controller",),
    leases=(Lease("cert-manager-controller", "kube-system"),),
)

# --- External Secrets ---------------------------------------------------------------------------------------
# external-secrets/external-secrets:deploy/charts/external-secrets/values.yaml: leaderElect false by
# default (ID "external-secrets-controller", cmd/controller/root.go:354), image
# ghcr.io/external-secrets/external-secrets; the Deployment takes the release's name
ESO_OWNER = Owner("the External Secrets Operator", markers=("external-secrets",))
ESO = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "external-secrets", "external-secrets"),),
    images=("external-secrets/external-secrets",),
    leases=(),
)


def _kyverno(finalizer: str, source: str) -> CatalogueEntry:
    return CatalogueEntry(
        finalizer=finalizer,
        prefix=False,
        project="Kyverno",
        owner=KYVERNO_OWNER,
        runtime=KYVERNO,
        resources=_KYVERNO_RESOURCES,
        open_resources=False,
        cleanup="Deletes Kyverno's webhook configurations as the controller shuts down, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete Kyverno's Validating/MutatingWebhookConfigurations by hand.",
        source=source,
    )


def _gatekeeper(finalizer: str, resources: tuple[tuple[str, str], ...], source: str) -> CatalogueEntry:
    return CatalogueEntry(
        finalizer=finalizer,
        prefix=False,
        project="Gatekeeper",
        owner=Owner(f"nothing (current Gatekeeper releases no longer remove {finalizer})"),
        runtime=GATEKEEPER,
        resources=resources,
        open_resources=finalizer in {"finalizers.gatekeeper.sh/sync", "finalizers.gatekeeper.sh/constraint"},
        cleanup="Gatekeeper once dropped the object from its cache or policy engine; nothing does now.",
        creates_in_namespace=False,
        manual_cleanup="Nothing to clean: remove the finalizer.",
        source=source,
    )


ENTRIES: tuple[CatalogueEntry, ...] = (
    # istio/istio:operator/pkg/controller/istiocontrolplane/istiocontrolplane_controller.go `finalizer`
    # (read through the code index; the file is gone from current istio/istio)
    CatalogueEntry(
        finalizer="istio-finalizer.install.istio.io",
        prefix=False,
        project="Istio",
        owner=Owner("the Istio operator", markers=("istio-operator",)),
        runtime=ISTIO_OPERATOR,
        resources=(("install.istio.io", "istiooperators"),),
        open_resources=False,
        cleanup="Deletes the control plane the IstioOperator installed, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Uninstall the control plane by hand (istioctl uninstall --revision <rev>).",
        source="istio/istio:operator/pkg/controller/istiocontrolplane/istiocontrolplane_controller.go",
        unverified="the istio-operator Deployment, image and Lease were not read",
    ),
    # Kept from the reference table; found only in a Deckhouse test fixture, not in
    # istio-ecosystem/sail-operator, whose Istio controller adds no finalizer
    # (controllers/istio/istio_controller.go:220 NewStandardReconciler)
    CatalogueEntry(
        finalizer="istio-finalizer.sailoperator.io",
        prefix=False,
        project="Istio",
        owner=SAIL_OWNER,
        runtime=SAIL,
        resources=(("sailoperator.io", "istios"),),
        open_resources=False,
        cleanup="Unknown: the Sail operator's source defines no finalizer of this name.",
        creates_in_namespace=None,
        manual_cleanup="Uninstall the Istio control plane the CR stood for (its IstioRevisions) by hand.",
        source="istio-ecosystem/sail-operator:controllers/istio/istio_controller.go:220 (absent there)",
        unverified="not defined in istio-ecosystem/sail-operator; kept from today's catalogue",
    ),
    # istio-ecosystem/sail-operator:pkg/constants/constants.go:47 FinalizerName, on IstioRevisions,
    # IstioCNIs, IstioRevisionTags and ZTunnels (controllers/*: NewStandardReconcilerWithFinalizer)
    CatalogueEntry(
        finalizer="sailoperator.io/sail-operator",
        prefix=False,
        project="Istio",
        owner=SAIL_OWNER,
        runtime=SAIL,
        resources=(
            ("sailoperator.io", "istiorevisions"),
            ("sailoperator.io", "istiocnis"),
            ("sailoperator.io", "istiorevisiontags"),
            ("sailoperator.io", "ztunnels"),
        ),
        open_resources=False,
        cleanup="Uninstalls the Helm release of istiod, the CNI or ztunnel the CR installed, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Uninstall the component's Helm release by hand (helm uninstall -n <namespace>).",
        source="istio-ecosystem/sail-operator:pkg/constants/constants.go:47",
    ),
    CatalogueEntry(
        finalizer="kiali.io/finalizer",
        prefix=False,
        project="Kiali",
        owner=Owner("the Kiali operator", markers=("kiali-operator", "kiali")),
        runtime=KIALI,
        resources=(("kiali.io", "kialis"), ("kiali.io", "ossmconsoles")),
        open_resources=False,
        cleanup="Runs its remove playbook, deleting the Kiali server's resources, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the Kiali server's Deployment, Service, ConfigMap and cluster roles by hand.",
        source="kiali/kiali-operator:watches.yaml",
        unverified="the kiali-operator Deployment and Lease were not read",
    ),
    _kyverno("kyverno.io/webhooks", KYVERNO_SOURCE),
    _kyverno("kyverno.io/exceptionwebhooks", KYVERNO_SOURCE),
    _kyverno("kyverno.io/celexceptionwebhooks", KYVERNO_SOURCE),
    _kyverno("kyverno.io/globalcontextwebhooks", KYVERNO_SOURCE),
    _kyverno("kyverno.io/policywebhooks", "kyverno/kyverno:cmd/cleanup-controller/main.go (before cce31df0a6)"),
    _kyverno("kyverno.io/ttlwebhooks", "kyverno/kyverno:cmd/cleanup-controller/main.go (before cce31df0a6)"),
    # Gatekeeper 3.0 and older put it on every object it synced for its policies, Namespaces included
    _gatekeeper(
        "finalizers.gatekeeper.sh/sync",
        (("", "namespaces"),),
        "open-policy-agent/gatekeeper:pkg/controller/sync/sync_controller.go:41 (before f7494cbbae, v3.1.0)",
    ),
    _gatekeeper(
        "finalizers.gatekeeper.sh/config",
        (("config.gatekeeper.sh", "configs"),),
        "open-policy-agent/gatekeeper:pkg/controller/config/config_controller.go:43 (v3.14.0)",
    ),
    _gatekeeper(
        "finalizers.gatekeeper.sh/constraint",
        (),
        "open-policy-agent/gatekeeper:pkg/controller/constraint/constraint_controller.go:56 (v3.14.0)",
    ),
    _gatekeeper(
        "constrainttemplate.finalizers.gatekeeper.sh",
        (("templates.gatekeeper.sh", "constrainttemplates"),),
        "open-policy-agent/gatekeeper:pkg/controller/constrainttemplate/constrainttemplate_controller.go:56 (v3.14.0)",
    ),
    # cert-manager/cert-manager:pkg/apis/acme/v1/const.go:20-21 ACMELegacyFinalizer and
    # ACMEDomainQualifiedFinalizer, on Challenges (pkg/controller/acmechallenges/sync.go:103-142); the
    # cleanup is the solver's CleanUp: it deletes the DNS record or the HTTP-01 solver's pod, service and
    # ingress
    CatalogueEntry(
        finalizer="finalizer.acme.cert-manager.io",
        prefix=False,
        project="cert-manager",
        owner=Owner("cert-manager", markers=("cert-manager",)),
        runtime=CERT_MANAGER,
        resources=(("acme.cert-manager.io", "challenges"),),
        open_resources=False,
        cleanup="Cleans up the ACME challenge (the DNS-01 record or the HTTP-01 solver), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the _acme-challenge TXT record from the DNS zone by hand (DNS-01).",
        source="cert-manager/cert-manager:pkg/apis/acme/v1/const.go:20",
    ),
    CatalogueEntry(
        finalizer="acme.cert-manager.io/finalizer",
        prefix=False,
        project="cert-manager",
        owner=Owner("cert-manager", markers=("cert-manager",)),
        runtime=CERT_MANAGER,
        resources=(("acme.cert-manager.io", "challenges"),),
        open_resources=False,
        cleanup="Cleans up the ACME challenge (the DNS-01 record or the HTTP-01 solver), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the _acme-challenge TXT record from the DNS zone by hand (DNS-01).",
        source="cert-manager/cert-manager:pkg/apis/acme/v1/const.go:21",
    ),
    # external-secrets/external-secrets:pkg/controllers/externalsecret/externalsecret_controller.go:73;
    # the cleanup deletes the Secrets the ExternalSecret manages (cleanupManagedSecrets, :211-238)
    CatalogueEntry(
        finalizer="externalsecrets.external-secrets.io/externalsecret-cleanup",
        prefix=False,
        project="External Secrets",
        owner=ESO_OWNER,
        runtime=ESO,
        resources=(("external-secrets.io", "externalsecrets"),),
        open_resources=False,
        cleanup="Deletes the Secrets the ExternalSecret created (deletionPolicy), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the Secret the ExternalSecret managed if it should not outlive it.",
        source="external-secrets/external-secrets:pkg/controllers/externalsecret/externalsecret_controller.go:73",
    ),
    # pkg/controllers/clusterexternalsecret/clusterexternalsecret_controller.go:69, and one finalizer per
    # ClusterExternalSecret on every Namespace it provisions, "externalsecrets.external-secrets.io/ces-"
    # + its name (:341-342); that one is dropped as soon as the namespace is being deleted (:206-210)
    CatalogueEntry(
        finalizer="externalsecrets.external-secrets.io/clusterexternalsecret-cleanup",
        prefix=False,
        project="External Secrets",
        owner=ESO_OWNER,
        runtime=ESO,
        resources=(("external-secrets.io", "clusterexternalsecrets"),),
        open_resources=False,
        cleanup="Deletes the ExternalSecrets it created in every namespace and its namespace finalizers.",
        creates_in_namespace=False,
        manual_cleanup="Delete the ExternalSecrets it created and its ces- finalizers from the namespaces.",
        source="external-secrets/external-secrets:pkg/controllers/clusterexternalsecret/clusterexternalsecret_controller.go:69",
    ),
    CatalogueEntry(
        finalizer="externalsecrets.external-secrets.io/ces-",
        prefix=True,
        project="External Secrets",
        owner=ESO_OWNER,
        runtime=ESO,
        resources=(("", "namespaces"),),
        open_resources=False,
        cleanup="Removes it as soon as the namespace is being deleted, or when its ClusterExternalSecret goes.",
        creates_in_namespace=False,
        manual_cleanup="Nothing to clean: the namespace's ExternalSecrets go with it.",
        source="external-secrets/external-secrets:pkg/controllers/clusterexternalsecret/clusterexternalsecret_controller.go:342",
    ),
    # pkg/controllers/pushsecret/pushsecret_controller.go:74; the cleanup deletes the pushed secret from
    # the providers (DeletionPolicy Delete)
    CatalogueEntry(
        finalizer="pushsecret.externalsecrets.io/finalizer",
        prefix=False,
        project="External Secrets",
        owner=ESO_OWNER,
        runtime=ESO,
        resources=(("external-secrets.io", "pushsecrets"),),
        open_resources=False,
        cleanup="Deletes the secret it pushed from the external secret stores, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the pushed secret from the external store (Vault, AWS...) by hand.",
        source="external-secrets/external-secrets:pkg/controllers/pushsecret/pushsecret_controller.go:74",
    ),
    # pkg/controllers/secretstore/common.go:57,227-239: kept while PushSecrets with DeletionPolicy=Delete
    # still use the store
    CatalogueEntry(
        finalizer="secretstore.externalsecrets.io/finalizer",
        prefix=False,
        project="External Secrets",
        owner=ESO_OWNER,
        runtime=ESO,
        resources=(("external-secrets.io", "secretstores"), ("external-secrets.io", "clustersecretstores")),
        open_resources=False,
        cleanup="Waits until no PushSecret that deletes its secrets uses the store, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the PushSecrets that still use the store.",
        source="external-secrets/external-secrets:pkg/controllers/secretstore/common.go:57",
    ),
    # pkg/controllers/generatorstate/generatorstate_controller.go:50; the cleanup is the generator's
    # Cleanup (revoking what it generated)
    CatalogueEntry(
        finalizer="generatorstate.externalsecrets.io/finalizer",
        prefix=False,
        project="External Secrets",
        owner=ESO_OWNER,
        runtime=ESO,
        resources=(("generators.external-secrets.io", "generatorstates"),),
        open_resources=False,
        cleanup="Revokes what the generator made (a token, a password...), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Revoke the generated credential in the system that issued it.",
        source="external-secrets/external-secrets:pkg/controllers/generatorstate/generatorstate_controller.go:50",
    ),
)
