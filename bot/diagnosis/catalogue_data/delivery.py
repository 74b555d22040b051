"""Delivery: Argo CD, Argo Workflows, Flux, Rancher (Fleet, wrangler, norman), the k3s/RKE2 helm-controller
and Tekton."""

from __future__ import annotations

from bot.diagnosis.catalogue_model import CatalogueEntry, Lease, Owner, RunsIn, Runtime, Workload

# --- Argo CD ------------------------------------------------------------------------------------------------
# argoproj/argo-cd:manifests/install.yaml (applied to the argocd namespace): StatefulSet
# argocd-application-controller, Deployment argocd-applicationset-controller, image quay.io/argoproj/argocd.
# The application controller elects no leader (it shards by StatefulSet ordinal); the ApplicationSet
# controller's leader election (ID 58ac56fa.applicationsets.argoproj.io) is off by default
# (cmd/argocd-applicationset-controller/commands/applicationset_controller.go:172,297).
ARGOCD_OWNER = Owner("the Argo CD application controller", markers=("argocd",))
ARGOCD = Runtime(
    RunsIn.WORKLOAD,
    workloads=(
        Workload("StatefulSet", "argocd-application-controller", "argocd"),
        Workload("Deployment", "argocd-applicationset-controller", "argocd"),
    ),
    images=("quay.io/argoproj/argocd",),
    leases=(),
)
ARGOCD_SOURCE = "argoproj/argo-cd:pkg/apis/application/v1alpha1/application_defaults.go"

# --- Argo Workflows (also the engine of Kubeflow Pipelines) -------------------------------------------------
# argoproj/argo-workflows:cmd/workflow-controller/main.go:151 leaderName "workflow-controller" (with
# "-<instanceID>" when one is set), a Lease in the controller's namespace
ARGO_WORKFLOWS_OWNER = Owner("the Argo Workflows controller", markers=("workflow-controller",))
ARGO_WORKFLOWS = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "workflow-controller", "argo"),),
    images=("argoproj/workflow-controller",),
    leases=(Lease("workflow-controller", "argo"),),
)

# --- Flux ---------------------------------------------------------------------------------------------------
# Every Flux controller uses finalizers.fluxcd.io and holds a Lease "<controller>-leader-election" in
# flux-system: fluxcd/source-controller:main.go:364, fluxcd/kustomize-controller:main.go:204,
# fluxcd/helm-controller:main.go:238, fluxcd/notification-controller:main.go:175,
# fluxcd/image-reflector-controller:main.go:208 (their config/manager/deployment.yaml passes
# --enable-leader-election; with a watch label selector the name gets a suffix).
FLUX_OWNER = Owner("the Flux controllers", markers=("flux", "fluxcd"))
_FLUX_CONTROLLERS = (
    "source-controller",
    "kustomize-controller",
    "helm-controller",
    "notification-controller",
    "image-reflector-controller",
)
FLUX = Runtime(
    RunsIn.WORKLOAD,
    workloads=tuple(Workload("Deployment", name, "flux-system") for name in _FLUX_CONTROLLERS),
    images=("ghcr.io/fluxcd/",),
    leases=tuple(Lease(f"{name}-leader-election", "flux-system") for name in _FLUX_CONTROLLERS),
)

# --- Rancher, Fleet, wrangler, norman -----------------------------------------------------------------------
# rancher/rancher:pkg/wrangler/context.go:538 leader.NewManager("", "cattle-controllers"), and
# rancher/wrangler:pkg/leader/leader.go puts an empty namespace in kube-system. The Rancher server is
# Deployment rancher in cattle-system (image rancher/rancher); downstream clusters run cattle-cluster-agent.
RANCHER_OWNER = Owner("the Rancher agent", markers=("cattle", "rancher"))
RANCHER = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "rancher", "cattle-system"),),
    images=("rancher/rancher",),
    leases=(Lease("cattle-controllers", "kube-system"),),
)
# rancher/fleet:internal/cmd/controller/operator.go:76, gitops/operator.go:114, helmops/operator.go:91:
# controller-runtime Leases "fleet-controller-leader-election-shard", "fleet-gitops-leader-election-shard",
# "fleet-helmops-leader-election-shard" (plus "-<shard id>" when sharded), in the controller's namespace;
# images rancher/fleet (charts/fleet/values.yaml)
FLEET_OWNER = Owner("the Fleet controller", markers=("fleet-controller", "rancher/fleet"))
FLEET = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "fleet-controller", "cattle-fleet-system"),),
    images=("rancher/fleet",),
    leases=(
        Lease("fleet-controller-leader-election-shard", "cattle-fleet-system"),
        Lease("fleet-gitops-leader-election-shard", "cattle-fleet-system"),
        Lease("fleet-helmops-leader-election-shard", "cattle-fleet-system"),
    ),
)
FLEET_SOURCE = "rancher/fleet:internal/cmd/controller/finalize/finalize.go:17-22"

# --- the k3s/RKE2 helm-controller ---------------------------------------------------------------------------
# Embedded in the k3s and RKE2 servers; also a standalone Deployment (k3s-io/helm-controller:
# manifests/deployment.yaml: helm-controller in helm-controller, image rancher/helm-controller), whose
# Lease is "<controller name>-lock" ("helm-controller-lock" by default) in the system namespace,
# kube-system when none is given (pkg/controllers/controllers.go:124-131). k3s runs its embedded
# controllers under its own Lease "k3s" in kube-system (k3s-io/k3s:pkg/server/server.go
# leader.RunOrDie(ctx, "", "k3s", ...), an older version read through the code index; RKE2's was not read).
HELM_CONTROLLER = Runtime(
    RunsIn.DISTRIBUTION,
    "k3s and RKE2 servers (or the standalone helm-controller Deployment)",
    workloads=(Workload("Deployment", "helm-controller", "helm-controller"),),
    images=("rancher/helm-controller",),
    leases=(Lease("helm-controller-lock", "kube-system"), Lease("k3s", "kube-system")),
)

# --- Tekton -------------------------------------------------------------------------------------------------
# tektoncd/pipeline's own reconcilers implement no FinalizeKind, so its generated finalizer names
# (pipelineruns.tekton.dev, ...) are never added; Chains and Results add theirs. Both use knative.dev/pkg
# leader election: one Lease per reconciler and bucket ("{component}.{queue}.NN-of-NN"), not listed.
CHAINS_OWNER = Owner("Tekton Chains", markers=("tekton-chains",))
CHAINS = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "tekton-chains-controller", "tekton-chains"),),
    images=("tektoncd/chains",),
    leases=None,
)
RESULTS_OWNER = Owner("the Tekton Results watcher", markers=("tekton-results-watcher", "tektoncd/results"))
RESULTS = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "tekton-results-watcher", "tekton-pipelines"),),
    images=("tektoncd/results",),
    leases=None,
)

ENTRIES: tuple[CatalogueEntry, ...] = (
    # ResourcesFinalizerName, with "/foreground" and "/background" variants (application_defaults.go:10-22);
    # on Applications, AppProjects (app_project_types.go:437) and ApplicationSets with reverse deletion
    # order (applicationset/controllers/applicationset_controller.go:174-189)
    CatalogueEntry(
        finalizer="resources-finalizer.argocd.argoproj.io",
        prefix=True,
        project="Argo CD",
        owner=ARGOCD_OWNER,
        runtime=ARGOCD,
        resources=(
            ("argoproj.io", "applications"),
            ("argoproj.io", "appprojects"),
            ("argoproj.io", "applicationsets"),
        ),
        open_resources=False,
        cleanup="Deletes every resource the application deployed (cascade), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete what the application deployed by hand (its app.kubernetes.io/instance label marks it).",
        source=ARGOCD_SOURCE,
    ),
    # PostDeleteFinalizerName, PreDeleteFinalizerName (application_defaults.go:13,16), with "/<stage>"
    # suffixes (types.go:3620). Their cleanup creates the PostDelete/PreDelete hook resources (usually
    # Jobs) in the application's destination namespace, which is the object's namespace only when the
    # Application lives there: unknown in general.
    CatalogueEntry(
        finalizer="post-delete-finalizer.argocd.argoproj.io",
        prefix=True,
        project="Argo CD",
        owner=ARGOCD_OWNER,
        runtime=ARGOCD,
        resources=(("argoproj.io", "applications"),),
        open_resources=False,
        cleanup="Runs the application's PostDelete hooks after its resources are gone, then removes it.",
        creates_in_namespace=None,
        manual_cleanup="Run by hand what the PostDelete hooks would have done.",
        source=ARGOCD_SOURCE,
    ),
    CatalogueEntry(
        finalizer="pre-delete-finalizer.argocd.argoproj.io",
        prefix=True,
        project="Argo CD",
        owner=ARGOCD_OWNER,
        runtime=ARGOCD,
        resources=(("argoproj.io", "applications"),),
        open_resources=False,
        cleanup="Runs the application's PreDelete hooks before deleting its resources, then removes it.",
        creates_in_namespace=None,
        manual_cleanup="Run by hand what the PreDelete hooks would have done.",
        source=ARGOCD_SOURCE,
    ),
    # argoproj/argo-cd:gitops-engine/pkg/sync/hook/hook.go:15 HookFinalizer, on sync hook resources
    # (any kind; Jobs and Pods are the usual) until the sync phase completes
    CatalogueEntry(
        finalizer="argocd.argoproj.io/hook-finalizer",
        prefix=False,
        project="Argo CD",
        owner=ARGOCD_OWNER,
        runtime=ARGOCD,
        resources=(("batch", "jobs"), ("", "pods")),
        open_resources=True,
        cleanup="Removes it from a sync hook resource once the sync phase that ran it is over.",
        creates_in_namespace=False,
        manual_cleanup="Nothing to clean: the hook resource is only being kept until its sync phase ends.",
        source="argoproj/argo-cd:gitops-engine/pkg/sync/hook/hook.go:15",
    ),
    # Kept from the reference table (§6): no such constant exists in argoproj/argo-cd (see `unverified`).
    # The name is seen in hand-written manifests, where the API server warns that it is not
    # domain-qualified; Argo CD itself only acts on resources-finalizer.argocd.argoproj.io.
    CatalogueEntry(
        finalizer="argoproj.io/",
        prefix=True,
        project="Argo CD",
        owner=Owner("Argo CD", markers=("argocd", "argo")),
        runtime=ARGOCD,
        resources=(("argoproj.io", "applications"),),
        open_resources=False,
        cleanup="Unknown: Argo CD's source defines no finalizer of this form.",
        creates_in_namespace=None,
        manual_cleanup="Check whether anything in the cluster still acts on it before removing it.",
        source="argoproj/argo-cd:pkg/apis/application/v1alpha1/application_defaults.go (absent there)",
        unverified="argoproj.io/resources-finalizer is not defined in argoproj/argo-cd; kept from today's catalogue",
    ),
    # argoproj/argo-workflows:workflow/common/common.go:219 FinalizerArtifactGC. Its cleanup starts
    # artifact-GC Pods in the workflow's own namespace (workflow/controller/artifact_gc.go:223,302):
    # in a terminating namespace they are refused and the finalizer stays.
    CatalogueEntry(
        finalizer="workflows.argoproj.io/artifact-gc",
        prefix=False,
        project="Argo Workflows",
        owner=ARGO_WORKFLOWS_OWNER,
        runtime=ARGO_WORKFLOWS,
        resources=(("argoproj.io", "workflows"),),
        open_resources=False,
        cleanup="Starts artifact-GC Pods that delete the workflow's artifacts from their repository, then removes it.",
        creates_in_namespace=True,
        manual_cleanup="Delete the workflow's artifacts from the artifact repository (S3, GCS...) by hand.",
        source="argoproj/argo-workflows:workflow/common/common.go:219",
    ),
    # workflow/common/common.go:222 FinalizerPodStatus, on workflow Pods when the controller runs with
    # ARGO_POD_STATUS_CAPTURE_FINALIZER=true (workflow/controller/workflowpod.go:290)
    CatalogueEntry(
        finalizer="workflows.argoproj.io/status",
        prefix=False,
        project="Argo Workflows",
        owner=ARGO_WORKFLOWS_OWNER,
        runtime=ARGO_WORKFLOWS,
        resources=(("", "pods"),),
        open_resources=False,
        cleanup="Records the pod's final status in its workflow, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Nothing to clean: the workflow only loses the pod's final status.",
        source="argoproj/argo-workflows:workflow/common/common.go:222",
    ),
    # SourceFinalizer, KustomizationFinalizer, HelmReleaseFinalizer, NotificationFinalizer, ImageFinalizer:
    # all "finalizers.fluxcd.io". HelmRelease's cleanup is a Helm uninstall, which runs the chart's
    # pre-/post-delete hooks (usually Jobs) in the release's namespace: unknown in general.
    CatalogueEntry(
        finalizer="finalizers.fluxcd.io",
        prefix=False,
        project="Flux",
        owner=FLUX_OWNER,
        runtime=FLUX,
        resources=(
            ("source.toolkit.fluxcd.io", "gitrepositories"),
            ("source.toolkit.fluxcd.io", "helmrepositories"),
            ("source.toolkit.fluxcd.io", "helmcharts"),
            ("source.toolkit.fluxcd.io", "buckets"),
            ("source.toolkit.fluxcd.io", "ocirepositories"),
            ("kustomize.toolkit.fluxcd.io", "kustomizations"),
            ("helm.toolkit.fluxcd.io", "helmreleases"),
            ("notification.toolkit.fluxcd.io", "alerts"),
            ("notification.toolkit.fluxcd.io", "providers"),
            ("image.toolkit.fluxcd.io", "imagerepositories"),
            ("image.toolkit.fluxcd.io", "imagepolicies"),
        ),
        open_resources=False,
        cleanup="Prunes what a Kustomization applied, uninstalls a HelmRelease, or drops a source's artifacts.",
        creates_in_namespace=None,
        manual_cleanup="Uninstall the Helm release (helm uninstall) or delete what the Kustomization applied.",
        source="fluxcd/source-controller:api/v1/condition_types.go:19 (and each controller's api/)",
    ),
    # rancher/rancher:pkg/controllers/managementuser/rbac/namespace_handler.go:44 normanLifecycleFinalizer
    # (run by the Rancher server for each cluster it manages)
    CatalogueEntry(
        finalizer="controller.cattle.io/namespace-auth",
        prefix=False,
        project="Rancher",
        owner=RANCHER_OWNER,
        runtime=RANCHER,
        resources=(("", "namespaces"),),
        open_resources=False,
        cleanup="Removes the namespace's project role bindings and quota bookkeeping, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Remove the namespace from its Rancher project in the Rancher UI or API.",
        source="rancher/rancher:pkg/controllers/managementuser/rbac/namespace_handler.go:44",
    ),
    # rancher/norman lifecycle handlers (creates_in_namespace unknown for these families: each handler
    # cleans up differently): "controller.cattle.io/<handler>" (e.g. rancher/rancher:
    # pkg/controllers/management/auth/user.go:59); cluster-scoped ones "clusterscoped.controller.cattle.io/
    # <handler>_<cluster>" (pkg/controllers/management/node/controller.go:19,
    # pkg/controllers/managementuser/secret/project_scoped_secrets.go:55)
    CatalogueEntry(
        finalizer="controller.cattle.io/",
        prefix=True,
        project="Rancher",
        owner=RANCHER_OWNER,
        runtime=RANCHER,
        resources=(
            ("", "namespaces"),
            ("management.cattle.io", "users"),
            ("management.cattle.io", "tokens"),
            ("management.cattle.io", "nodes"),
        ),
        open_resources=True,
        cleanup="Runs the named Rancher lifecycle handler's cleanup, then removes it.",
        creates_in_namespace=None,
        manual_cleanup="Clean up through the Rancher UI or API what the handler manages.",
        source="rancher/rancher:pkg/controllers/management/auth/user.go:59",
    ),
    CatalogueEntry(
        finalizer="clusterscoped.controller.cattle.io/",
        prefix=True,
        project="Rancher",
        owner=RANCHER_OWNER,
        runtime=RANCHER,
        resources=(("management.cattle.io", "nodes"), ("", "secrets")),
        open_resources=True,
        cleanup="Runs the named Rancher handler's cleanup for one downstream cluster, then removes it.",
        creates_in_namespace=None,
        manual_cleanup="Clean up through the Rancher UI or API what the handler manages.",
        source="rancher/rancher:pkg/controllers/management/node/controller.go:19",
    ),
    # rancher/wrangler:pkg/generic/remove.go:9 finalizerKey "wrangler.cattle.io/" + handler name (any
    # wrangler-based controller's OnRemove handler: what it creates depends on the handler)
    CatalogueEntry(
        finalizer="wrangler.cattle.io/",
        prefix=True,
        project="Rancher",
        owner=RANCHER_OWNER,
        runtime=RANCHER,
        resources=(),
        open_resources=True,
        cleanup="Runs the named wrangler OnRemove handler, then removes it.",
        creates_in_namespace=None,
        manual_cleanup="Clean up through the Rancher UI or API what the handler manages.",
        source="rancher/wrangler:pkg/generic/remove.go:9",
    ),
    # k3s-io/helm-controller:pkg/controllers/chart/chart.go:185 RegisterScopedOnRemoveHandler
    # "on-helm-chart-remove", under wrangler's "wrangler.cattle.io/" prefix. OnRemove (chart.go:419-505)
    # creates the helm-delete Job, its Secret and ConfigMap in the HelmChart's own namespace (job(),
    # chart.go:830-856) and waits for it. Current releases give up when that creation is refused because
    # the namespace is terminating (chart.go:491-502) and let the finalizer go; older ones wait forever.
    CatalogueEntry(
        finalizer="wrangler.cattle.io/on-helm-chart-remove",
        prefix=False,
        project="k3s/RKE2 helm-controller",
        owner=Owner("the k3s/RKE2 helm-controller", markers=("rancher/helm-controller",)),
        runtime=HELM_CONTROLLER,
        resources=(("helm.cattle.io", "helmcharts"),),
        open_resources=False,
        cleanup="Runs a helm-delete Job in the chart's namespace to uninstall the release, then removes it.",
        creates_in_namespace=True,
        manual_cleanup="Uninstall the Helm release by hand (helm uninstall <release> -n <target namespace>).",
        source="k3s-io/helm-controller:pkg/controllers/chart/chart.go:185",
    ),
    # rancher/fleet:internal/cmd/controller/finalize/finalize.go:17-22
    CatalogueEntry(
        finalizer="fleet.cattle.io/gitrepo-finalizer",
        prefix=False,
        project="Fleet",
        owner=FLEET_OWNER,
        runtime=FLEET,
        resources=(("fleet.cattle.io", "gitrepos"),),
        open_resources=False,
        cleanup="Deletes the GitRepo's Bundles (and so what they deployed), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the GitRepo's Bundles and what they deployed in the target clusters.",
        source=FLEET_SOURCE,
    ),
    CatalogueEntry(
        finalizer="fleet.cattle.io/helmop-finalizer",
        prefix=False,
        project="Fleet",
        owner=FLEET_OWNER,
        runtime=FLEET,
        resources=(("fleet.cattle.io", "helmops"),),
        open_resources=False,
        cleanup="Deletes the HelmOp's Bundles, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Uninstall the Helm release from the target clusters by hand.",
        source=FLEET_SOURCE,
    ),
    CatalogueEntry(
        finalizer="fleet.cattle.io/bundle-finalizer",
        prefix=False,
        project="Fleet",
        owner=FLEET_OWNER,
        runtime=FLEET,
        resources=(("fleet.cattle.io", "bundles"),),
        open_resources=False,
        cleanup="Deletes the Bundle's BundleDeployments, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the Bundle's BundleDeployments and what they deployed.",
        source=FLEET_SOURCE,
    ),
    CatalogueEntry(
        finalizer="fleet.cattle.io/bundle-deployment-finalizer",
        prefix=False,
        project="Fleet",
        owner=FLEET_OWNER,
        runtime=FLEET,
        resources=(("fleet.cattle.io", "bundledeployments"),),
        open_resources=False,
        cleanup="Removes it as soon as the BundleDeployment is being deleted (bundledeployment_controller.go:75-82).",
        creates_in_namespace=False,
        manual_cleanup="Uninstall the deployed Helm release from the downstream cluster by hand.",
        source=FLEET_SOURCE,
    ),
    CatalogueEntry(
        finalizer="fleet.cattle.io/cluster-finalizer",
        prefix=False,
        project="Fleet",
        owner=FLEET_OWNER,
        runtime=FLEET,
        resources=(("fleet.cattle.io", "clusters"),),
        open_resources=False,
        cleanup="Deletes the cluster's fleet-agent Bundle and its Fleet namespace, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the cluster's fleet-agent Bundle and its cluster-fleet-* namespace by hand.",
        source=FLEET_SOURCE,
    ),
    CatalogueEntry(
        finalizer="fleet.cattle.io/schedule-finalizer",
        prefix=False,
        project="Fleet",
        owner=FLEET_OWNER,
        runtime=FLEET,
        resources=(("fleet.cattle.io", "schedules"),),
        open_resources=False,
        cleanup="Takes the schedule off the clusters it matched, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Nothing outside Fleet: its clusters only stay marked as scheduled.",
        source=FLEET_SOURCE,
    ),
    # tektoncd/chains:pkg/reconciler/taskrun/taskrun.go:40 and pipelinerun/pipelinerun.go:44: FinalizeKind
    # signs the finished run and stores its attestation (annotations, an OCI registry, Grafeas...), so
    # nothing is created in the namespace
    CatalogueEntry(
        finalizer="chains.tekton.dev/taskrun",
        prefix=False,
        project="Tekton",
        owner=CHAINS_OWNER,
        runtime=CHAINS,
        resources=(("tekton.dev", "taskruns"),),
        open_resources=False,
        cleanup="Signs the finished TaskRun and stores its provenance, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Nothing to clean: the run is only left unsigned.",
        source="tektoncd/chains:pkg/reconciler/taskrun/taskrun.go:40",
    ),
    CatalogueEntry(
        finalizer="chains.tekton.dev/pipelinerun",
        prefix=False,
        project="Tekton",
        owner=CHAINS_OWNER,
        runtime=CHAINS,
        resources=(("tekton.dev", "pipelineruns"),),
        open_resources=False,
        cleanup="Signs the finished PipelineRun and stores its provenance, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Nothing to clean: the run is only left unsigned.",
        source="tektoncd/chains:pkg/reconciler/pipelinerun/pipelinerun.go:44",
    ),
    # tektoncd/results:pkg/watcher/reconciler/filter.go:29-30: FinalizeKind stores the run in the Results
    # API before it goes (taskrun/reconciler.go:109)
    CatalogueEntry(
        finalizer="results.tekton.dev/taskrun",
        prefix=False,
        project="Tekton",
        owner=RESULTS_OWNER,
        runtime=RESULTS,
        resources=(("tekton.dev", "taskruns"),),
        open_resources=False,
        cleanup="Stores the TaskRun and its logs in Tekton Results, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Nothing to clean: the run is only missing from Tekton Results.",
        source="tektoncd/results:pkg/watcher/reconciler/filter.go:30",
    ),
    CatalogueEntry(
        finalizer="results.tekton.dev/pipelinerun",
        prefix=False,
        project="Tekton",
        owner=RESULTS_OWNER,
        runtime=RESULTS,
        resources=(("tekton.dev", "pipelineruns"),),
        open_resources=False,
        cleanup="Stores the PipelineRun in Tekton Results, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Nothing to clean: the run is only missing from Tekton Results.",
        source="tektoncd/results:pkg/watcher/reconciler/filter.go:29",
    ),
)
