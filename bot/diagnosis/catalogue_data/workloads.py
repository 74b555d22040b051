"""Application platforms: Knative, Strimzi, KEDA, the Prometheus operator and Kubeflow (profiles, the
Spark operator, KServe)."""

from __future__ import annotations

from bot.diagnosis.catalogue_model import CatalogueEntry, Lease, Owner, RunsIn, Runtime, Workload

# --- Knative ------------------------------------------------------------------------------------------------
# knative.dev/pkg's generated reconcilers name the finalizer "<plural>.<group>"
# (codegen/cmd/injection-gen/generators/reconciler/reconciler_controller.go:197) and add it only when the
# reconciler implements FinalizeKind. Leader election holds one Lease per reconciler and bucket,
# "{component}.{queue}.NN-of-NN" (knative.dev/pkg leaderelection/context.go:204): none is listed.
SERVING_OWNER = Owner("the Knative Serving controller", markers=("knative-serving",))
SERVING = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "controller", "knative-serving"),),  # config/core/deployments/controller.yaml
    images=("knative.dev/serving/cmd/controller",),
    leases=None,
)
EVENTING_OWNER = Owner("the Knative Eventing controller", markers=("eventing-controller", "knative-eventing"))
EVENTING = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "eventing-controller", "knative-eventing"),),
    images=("knative.dev/eventing/cmd/controller",),
    leases=None,
)

# --- Strimzi ------------------------------------------------------------------------------------------------
# The topic operator runs in the Kafka cluster's "<cluster>-entity-operator" Deployment
# (api/.../kafka/KafkaResources.java:195), in the Kafka cluster's own namespace: deleting that namespace
# takes it down with the KafkaTopics it should finalize. It elects no leader.
TOPIC_OPERATOR_OWNER = Owner("the Strimzi topic operator", markers=("entity-operator", "topic-operator"))
TOPIC_OPERATOR = Runtime(RunsIn.WORKLOAD, images=("strimzi/operator",), leases=())
# packaging/install/cluster-operator/060-Deployment-strimzi-cluster-operator.yaml: leader election on,
# Lease "strimzi-cluster-operator" in the operator's namespace, image quay.io/strimzi/operator. The YAML
# names no namespace (it goes where it is applied); "kafka" is the quick start's, not read here.
CLUSTER_OPERATOR = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "strimzi-cluster-operator", "kafka"),),
    images=("strimzi/operator",),
    leases=(Lease("strimzi-cluster-operator", "kafka"),),
)

# --- KEDA ---------------------------------------------------------------------------------------------------
# kedacore/keda:cmd/operator/main.go:111 leader election ID "operator.keda.sh" in the pod's namespace;
# config/manager/manager.yaml: Deployment keda-operator in keda, --leader-elect, image ghcr.io/kedacore/keda
KEDA = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "keda-operator", "keda"),),
    images=("kedacore/keda",),
    leases=(Lease("operator.keda.sh", "keda"),),
)

# --- Prometheus operator ------------------------------------------------------------------------------------
# No leader election in cmd/ or pkg/. The Deployment's name depends on the install (kube-prometheus-stack
# names it after the release), so none is listed.
PROMETHEUS_OPERATOR = Runtime(RunsIn.WORKLOAD, images=("prometheus-operator/prometheus-operator",), leases=())

# --- Kubeflow -----------------------------------------------------------------------------------------------
# kubeflow/dashboard:components/profile-controller/main.go:71,93: leader election off by default (ID
# "kubeflow-profile-controller"); the profile controller was in kubeflow/kubeflow before 6dbe51613.
PROFILES = Runtime(RunsIn.WORKLOAD, images=("kubeflow/profile-controller",), leases=())
# kubeflow/spark-operator:cmd/operator/controller/start.go:241-242 lock "spark-operator-lock" in
# "spark-operator" by default; the Helm chart (leaderElection enabled) may pass its own name, not read
SPARK = Runtime(RunsIn.WORKLOAD, images=("kubeflow/spark-operator",), leases=None)
# kserve/kserve:cmd/manager/main.go:57 LeaderLockName, config/manager/manager.yaml passes --leader-elect
KSERVE_OWNER = Owner("the KServe controller", markers=("kserve-controller-manager",))
KSERVE = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "kserve-controller-manager", "kserve"),),
    images=("kserve/kserve-controller",),
    leases=(Lease("kserve-controller-manager-leader-lock", "kserve"),),
)


def _knative(
    finalizer: str,
    *,
    owner: Owner,
    runtime: Runtime,
    resource: tuple[str, str],
    cleanup: str,
    manual: str,
    source: str,
) -> CatalogueEntry:
    return CatalogueEntry(
        finalizer=finalizer,
        prefix=False,
        project="Knative",
        owner=owner,
        runtime=runtime,
        resources=(resource,),
        open_resources=False,
        cleanup=cleanup,
        creates_in_namespace=False,
        manual_cleanup=manual,
        source=source,
    )


ENTRIES: tuple[CatalogueEntry, ...] = (
    # knative/serving:pkg/client/injection/reconciler/serving/v1/route/controller.go:47; FinalizeKind in
    # pkg/reconciler/labeler/labeler.go:41
    _knative(
        "routes.serving.knative.dev",
        owner=SERVING_OWNER,
        runtime=SERVING,
        resource=("serving.knative.dev", "routes"),
        cleanup="Removes the Route's labels from the Configurations and Revisions it routed to, then removes it.",
        manual="Nothing outside the cluster: remove the serving.knative.dev/route labels from its revisions.",
        source="knative/serving:pkg/reconciler/labeler/labeler.go:41",
    ),
    # pkg/reconciler/domainmapping/reconciler.go:150
    _knative(
        "domainmappings.serving.knative.dev",
        owner=SERVING_OWNER,
        runtime=SERVING,
        resource=("serving.knative.dev", "domainmappings"),
        cleanup="Deletes the ClusterDomainClaim it made for its domain, then removes it.",
        manual="Delete the domain's ClusterDomainClaim.",
        source="knative/serving:pkg/reconciler/domainmapping/reconciler.go:150",
    ),
    # knative/eventing:pkg/reconciler/subscription/subscription.go:132
    _knative(
        "subscriptions.messaging.knative.dev",
        owner=EVENTING_OWNER,
        runtime=EVENTING,
        resource=("messaging.knative.dev", "subscriptions"),
        cleanup="Removes the subscriber from its Channel's spec, then removes it.",
        manual="Remove the subscriber from the Channel's spec.subscribers.",
        source="knative/eventing:pkg/reconciler/subscription/subscription.go:132",
    ),
    # pkg/reconciler/apiserversource/apiserversource.go:190
    _knative(
        "apiserversources.sources.knative.dev",
        owner=EVENTING_OWNER,
        runtime=EVENTING,
        resource=("sources.knative.dev", "apiserversources"),
        cleanup="Clears the source's event types so they are cleaned up, then removes it.",
        manual="Delete the source's EventTypes.",
        source="knative/eventing:pkg/reconciler/apiserversource/apiserversource.go:190",
    ),
    # pkg/reconciler/pingsource/pingsource.go:152
    _knative(
        "pingsources.sources.knative.dev",
        owner=EVENTING_OWNER,
        runtime=EVENTING,
        resource=("sources.knative.dev", "pingsources"),
        cleanup="Clears the source's event types so they are cleaned up, then removes it.",
        manual="Delete the source's EventTypes.",
        source="knative/eventing:pkg/reconciler/pingsource/pingsource.go:152",
    ),
    # strimzi/strimzi-kafka-operator:topic-operator/src/main/java/io/strimzi/operator/topic/
    # KubernetesHandler.java:24 FINALIZER_STRIMZI_IO_TO (used unless STRIMZI_USE_FINALIZERS=false,
    # TopicOperatorConfig.java:72)
    CatalogueEntry(
        finalizer="strimzi.io/topic-operator",
        prefix=False,
        project="Strimzi",
        owner=TOPIC_OPERATOR_OWNER,
        runtime=TOPIC_OPERATOR,
        resources=(("kafka.strimzi.io", "kafkatopics"),),
        open_resources=False,
        cleanup="Deletes the topic in Kafka, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the topic in Kafka by hand (kafka-topics.sh --delete), if the cluster still exists.",
        source="strimzi/strimzi-kafka-operator:topic-operator/src/main/java/io/strimzi/operator/topic/KubernetesHandler.java:24",
    ),
    # cluster-operator/src/main/java/io/strimzi/operator/cluster/operator/assembly/
    # KafkaAutoRebalancingReconciler.java:51, on the KafkaRebalances it makes for auto-rebalancing
    CatalogueEntry(
        finalizer="strimzi.io/auto-rebalancing",
        prefix=False,
        project="Strimzi",
        owner=Owner("the Strimzi cluster operator", markers=("strimzi-cluster-operator",)),
        runtime=CLUSTER_OPERATOR,
        resources=(("kafka.strimzi.io", "kafkarebalances"),),
        open_resources=False,
        cleanup="Removes it when the auto-rebalancing it tracked is over, then deletes the KafkaRebalance.",
        creates_in_namespace=False,
        manual_cleanup="Nothing outside the cluster: the rebalance is only abandoned.",
        source="strimzi/strimzi-kafka-operator:cluster-operator/src/main/java/io/strimzi/operator/cluster/operator/assembly/KafkaAutoRebalancingReconciler.java:51",
    ),
    # kedacore/keda:controllers/keda/scaledobject_finalizer.go:35, scaledjob_finalizer.go:33,
    # controllers/keda/util/finalizer.go:19 (trigger authentications), controllers/eventing/finalizer.go:29
    CatalogueEntry(
        finalizer="finalizer.keda.sh",
        prefix=False,
        project="KEDA",
        owner=Owner("the KEDA operator", markers=("keda-operator", "keda")),
        runtime=KEDA,
        resources=(
            ("keda.sh", "scaledobjects"),
            ("keda.sh", "scaledjobs"),
            ("keda.sh", "triggerauthentications"),
            ("keda.sh", "clustertriggerauthentications"),
            ("eventing.keda.sh", "cloudeventsources"),
            ("eventing.keda.sh", "clustercloudeventsources"),
        ),
        open_resources=False,
        cleanup="Stops the scale loop (restoring the target's replica count if asked), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Nothing outside the cluster: set the target's replicas by hand if KEDA was to restore them.",
        source="kedacore/keda:controllers/keda/scaledobject_finalizer.go:35",
    ),
    # prometheus-operator/prometheus-operator:pkg/k8s/finalizer.go:27 StatusCleanupFinalizerName, added
    # (pkg/operator/finalizer.go) only with the StatusForConfigurationResources feature gate, off by
    # default (pkg/operator/config.go:113-116)
    CatalogueEntry(
        finalizer="monitoring.coreos.com/status-cleanup",
        prefix=False,
        project="Prometheus operator",
        owner=Owner("the Prometheus operator", markers=("prometheus-operator",)),
        runtime=PROMETHEUS_OPERATOR,
        resources=(
            ("monitoring.coreos.com", "prometheuses"),
            ("monitoring.coreos.com", "prometheusagents"),
            ("monitoring.coreos.com", "thanosrulers"),
        ),
        open_resources=False,
        cleanup="Removes the workload's bindings from the status of the monitors and rules it selected.",
        creates_in_namespace=False,
        manual_cleanup="Nothing outside the cluster: the monitors' status keeps a stale binding.",
        source="prometheus-operator/prometheus-operator:pkg/k8s/finalizer.go:27",
    ),
    # kubeflow/dashboard:components/profile-controller/controllers/profile_controller.go:57 PROFILEFINALIZER
    # (not domain-qualified); the cleanup revokes the profile's plugins (cloud IAM bindings), :311-327
    CatalogueEntry(
        finalizer="profile-finalizer",
        prefix=False,
        project="Kubeflow",
        owner=Owner("the Kubeflow profile controller", markers=("profiles-deployment", "profile-controller")),
        runtime=PROFILES,
        resources=(("kubeflow.org", "profiles"),),
        open_resources=False,
        cleanup="Revokes the profile's plugins (cloud IAM bindings for its namespace), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Remove the profile's IAM bindings (AWS IAM role, GCP workload identity) by hand.",
        source="kubeflow/dashboard:components/profile-controller/controllers/profile_controller.go:57",
    ),
    # kubeflow/spark-operator:pkg/common/constants.go:24-25; the cleanup only deletes
    # (internal/controller/sparkapplication/controller.go:315-330 deleteSparkResources)
    CatalogueEntry(
        finalizer="sparkoperator.k8s.io/finalizer",
        prefix=False,
        project="Kubeflow",
        owner=Owner("the Kubeflow Spark operator", markers=("spark-operator",)),
        runtime=SPARK,
        resources=(
            ("sparkoperator.k8s.io", "sparkapplications"),
            ("sparkoperator.k8s.io", "scheduledsparkapplications"),
        ),
        open_resources=False,
        cleanup="Deletes the application's driver pod, services and ingresses, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the application's driver and executor pods.",
        source="kubeflow/spark-operator:pkg/common/constants.go:24",
        unverified="the Spark operator's Lease name under its Helm chart was not read",
    ),
    # kserve/kserve:pkg/controller/v1beta1/inferenceservice/controller.go:177 (deleteExternalResources)
    CatalogueEntry(
        finalizer="inferenceservice.finalizers",
        prefix=False,
        project="Kubeflow",
        owner=KSERVE_OWNER,
        runtime=KSERVE,
        resources=(("serving.kserve.io", "inferenceservices"),),
        open_resources=False,
        cleanup="Deletes the InferenceService's external dependencies, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete what the InferenceService made outside its owner references by hand.",
        source="kserve/kserve:pkg/controller/v1beta1/inferenceservice/controller.go:177",
    ),
)
