"""Infrastructure controllers: Crossplane, Cluster API, Config Connector, Metal3, the AWS Load Balancer
Controller and Karpenter."""

from __future__ import annotations

from bot.diagnosis.catalogue_model import CatalogueEntry, Lease, Owner, RunsIn, Runtime, Workload

# --- Crossplane ---------------------------------------------------------------------------------------------
# crossplane/crossplane:cmd/crossplane/core/core.go:241 LeaderElectionID "crossplane-leader-election-core";
# cluster/charts/crossplane/values.yaml: leaderElection true, image xpkg.crossplane.io/crossplane/crossplane
CROSSPLANE_OWNER = Owner("Crossplane", markers=("crossplane",))
CROSSPLANE = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "crossplane", "crossplane-system"),),
    images=("crossplane/crossplane",),
    leases=(Lease("crossplane-leader-election-core", "crossplane-system"),),
)
# Providers run as Deployments named after their package revision, in crossplane-system; each picks its
# own leader-election ID, so none is listed.
PROVIDER_OWNER = Owner("a Crossplane provider", markers=("crossplane", "provider-"))
PROVIDER = Runtime(RunsIn.WORKLOAD, images=("provider-",), leases=None)

# --- Cluster API, Config Connector, Metal3 ------------------------------------------------------------------
# Kept from the reference table; their constants were read, their workloads and Leases were not, so
# none are listed (the markers are today's).
CAPI_OWNER = Owner("Cluster API", markers=("capi-controller-manager", "cluster-api"))
CAPI = Runtime(RunsIn.WORKLOAD, images=("cluster-api-controller",), leases=None)
CNRM_OWNER = Owner("Config Connector", markers=("cnrm", "config-connector"))
CNRM = Runtime(RunsIn.WORKLOAD, leases=None)
METAL3 = Runtime(RunsIn.WORKLOAD, images=("metal3-io/baremetal-operator",), leases=None)

# --- AWS Load Balancer Controller ---------------------------------------------------------------------------
# kubernetes-sigs/aws-load-balancer-controller:pkg/config/runtime_config.go:39-40 defaultLeaderElectionID
# "aws-load-balancer-controller-leader" in the pod's namespace (kube-system by the usual install);
# helm/aws-load-balancer-controller/values.yaml: image public.ecr.aws/eks/aws-load-balancer-controller
AWS_LBC_OWNER = Owner("the AWS Load Balancer Controller", markers=("aws-load-balancer",))
AWS_LBC = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "aws-load-balancer-controller", "kube-system"),),
    images=("eks/aws-load-balancer-controller",),
    leases=(Lease("aws-load-balancer-controller-leader", "kube-system"),),
)
AWS_LBC_SOURCE = "kubernetes-sigs/aws-load-balancer-controller:pkg/shared_constants/finalizers.go"

# --- Karpenter ----------------------------------------------------------------------------------------------
# kubernetes-sigs/karpenter:pkg/operator/options/options.go:128 leader election name
# "karpenter-leader-election", in the pod's namespace (kube-system in its e2e tests,
# test/pkg/environment/common/expectations.go:540); aws/karpenter-provider-aws:charts/karpenter/values.yaml
# image public.ecr.aws/karpenter/controller
KARPENTER_OWNER = Owner("Karpenter", markers=("karpenter",))
KARPENTER = Runtime(
    RunsIn.WORKLOAD,
    workloads=(Workload("Deployment", "karpenter", "kube-system"),),
    images=("karpenter/controller",),
    leases=(Lease("karpenter-leader-election", "kube-system"),),
)

ENTRIES: tuple[CatalogueEntry, ...] = (
    # crossplane/crossplane-runtime:pkg/reconciler/managed/reconciler.go:47 FinalizerName
    CatalogueEntry(
        finalizer="finalizer.managedresource.crossplane.io",
        prefix=False,
        project="Crossplane",
        owner=PROVIDER_OWNER,
        runtime=PROVIDER,
        resources=(),
        open_resources=True,
        cleanup="Deletes the external (cloud) resource the managed resource represents, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the external resource in the cloud provider by hand.",
        source="crossplane/crossplane-runtime:pkg/reconciler/managed/reconciler.go:47",
    ),
    # crossplane/crossplane-runtime:pkg/reconciler/providerconfig/reconciler.go:41
    CatalogueEntry(
        finalizer="in-use.crossplane.io",
        prefix=False,
        project="Crossplane",
        owner=CROSSPLANE_OWNER,
        runtime=PROVIDER,
        resources=(),
        open_resources=True,
        cleanup="Removes it from a ProviderConfig once no managed resource uses it.",
        creates_in_namespace=False,
        manual_cleanup="Delete (or repoint) the managed resources that still use the ProviderConfig.",
        source="crossplane/crossplane-runtime:pkg/reconciler/providerconfig/reconciler.go:41",
    ),
    # crossplane/crossplane:internal/controller/apiextensions/composite/reconciler.go:60
    CatalogueEntry(
        finalizer="composite.apiextensions.crossplane.io",
        prefix=False,
        project="Crossplane",
        owner=CROSSPLANE_OWNER,
        runtime=CROSSPLANE,
        resources=(),
        open_resources=True,
        cleanup="Deletes the composite resource's composed resources, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the composed managed resources (and their external resources) by hand.",
        source="crossplane/crossplane:internal/controller/apiextensions/composite/reconciler.go:60",
    ),
    # internal/controller/apiextensions/claim/reconciler.go:49, on claims (namespaced, kinds an XRD offers)
    CatalogueEntry(
        finalizer="finalizer.apiextensions.crossplane.io",
        prefix=False,
        project="Crossplane",
        owner=CROSSPLANE_OWNER,
        runtime=CROSSPLANE,
        resources=(),
        open_resources=True,
        cleanup="Deletes the composite resource bound to the claim, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the bound composite resource and what it composed.",
        source="crossplane/crossplane:internal/controller/apiextensions/claim/reconciler.go:49",
    ),
    # internal/controller/apiextensions/definition/reconciler.go:65 and offered/reconciler.go:58, on XRDs
    CatalogueEntry(
        finalizer="defined.apiextensions.crossplane.io",
        prefix=False,
        project="Crossplane",
        owner=CROSSPLANE_OWNER,
        runtime=CROSSPLANE,
        resources=(("apiextensions.crossplane.io", "compositeresourcedefinitions"),),
        open_resources=False,
        cleanup="Deletes every composite resource of the definition and its CRD, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the definition's composite resources and its CRD.",
        source="crossplane/crossplane:internal/controller/apiextensions/definition/reconciler.go:65",
    ),
    CatalogueEntry(
        finalizer="offered.apiextensions.crossplane.io",
        prefix=False,
        project="Crossplane",
        owner=CROSSPLANE_OWNER,
        runtime=CROSSPLANE,
        resources=(("apiextensions.crossplane.io", "compositeresourcedefinitions"),),
        open_resources=False,
        cleanup="Deletes every claim the definition offers and the claim CRD, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the definition's claims and the claim CRD.",
        source="crossplane/crossplane:internal/controller/apiextensions/offered/reconciler.go:58",
    ),
    # internal/controller/protection/usage/reconciler.go:59, on Usages (legacy apiextensions.crossplane.io
    # and protection.crossplane.io)
    CatalogueEntry(
        finalizer="usage.apiextensions.crossplane.io",
        prefix=False,
        project="Crossplane",
        owner=CROSSPLANE_OWNER,
        runtime=CROSSPLANE,
        resources=(
            ("apiextensions.crossplane.io", "usages"),
            ("protection.crossplane.io", "usages"),
            ("protection.crossplane.io", "clusterusages"),
        ),
        open_resources=False,
        cleanup="Lifts the deletion protection the Usage put on the used resource, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Nothing outside the cluster: delete the resource that still uses the protected one.",
        source="crossplane/crossplane:internal/controller/protection/usage/reconciler.go:59",
    ),
    # internal/controller/pkg/revision/reconciler.go:64, on package revisions (cluster-scoped)
    CatalogueEntry(
        finalizer="revision.pkg.crossplane.io",
        prefix=False,
        project="Crossplane",
        owner=CROSSPLANE_OWNER,
        runtime=CROSSPLANE,
        resources=(
            ("pkg.crossplane.io", "providerrevisions"),
            ("pkg.crossplane.io", "configurationrevisions"),
            ("pkg.crossplane.io", "functionrevisions"),
        ),
        open_resources=False,
        cleanup="Removes the revision from the package lock and its runtime, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the package's Deployment and its entry in the Lock by hand.",
        source="crossplane/crossplane:internal/controller/pkg/revision/reconciler.go:64",
    ),
    # kubernetes-sigs/cluster-api:api/core/v1beta2/cluster_types.go ClusterFinalizer (read through the
    # code index: several copies of the constant, the newest in api/core/v1beta2)
    CatalogueEntry(
        finalizer="cluster.cluster.x-k8s.io",
        prefix=False,
        project="Cluster API",
        owner=CAPI_OWNER,
        runtime=CAPI,
        resources=(("cluster.x-k8s.io", "clusters"),),
        open_resources=False,
        cleanup="Deletes the cluster's control plane, machines and infrastructure, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the cluster's machines and cloud infrastructure by hand.",
        source="kubernetes-sigs/cluster-api:api/core/v1beta2/cluster_types.go (ClusterFinalizer)",
        unverified="Cluster API's workloads and Lease were not read",
    ),
    # machine_types.go MachineFinalizer ("set on PrepareForCreate callback")
    CatalogueEntry(
        finalizer="machine.cluster.x-k8s.io",
        prefix=False,
        project="Cluster API",
        owner=CAPI_OWNER,
        runtime=CAPI,
        resources=(("cluster.x-k8s.io", "machines"),),
        open_resources=False,
        cleanup="Drains the node, deletes it and the machine's infrastructure, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the machine's cloud instance and its Node by hand.",
        source="kubernetes-sigs/cluster-api:api/core/v1beta2/machine_types.go (MachineFinalizer)",
        unverified="Cluster API's workloads and Lease were not read",
    ),
    # GoogleCloudPlatform/k8s-config-connector:pkg/k8s/constants.go ControllerFinalizerName,
    # DeletionDefenderFinalizerName
    CatalogueEntry(
        finalizer="cnrm.cloud.google.com/finalizer",
        prefix=False,
        project="Config Connector",
        owner=CNRM_OWNER,
        runtime=CNRM,
        resources=(),
        open_resources=True,
        cleanup="Deletes the Google Cloud resource (unless abandoned), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the Google Cloud resource by hand (or keep it on purpose).",
        source="GoogleCloudPlatform/k8s-config-connector:pkg/k8s/constants.go (ControllerFinalizerName)",
        unverified="Config Connector's workloads and Lease were not read",
    ),
    CatalogueEntry(
        finalizer="cnrm.cloud.google.com/deletion-defender",
        prefix=False,
        project="Config Connector",
        owner=CNRM_OWNER,
        runtime=CNRM,
        resources=(),
        open_resources=True,
        cleanup="Holds the resource until Config Connector's own finalizer has run, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the Google Cloud resource by hand (or keep it on purpose).",
        source="GoogleCloudPlatform/k8s-config-connector:pkg/k8s/constants.go (DeletionDefenderFinalizerName)",
        unverified="Config Connector's workloads and Lease were not read",
    ),
    # metal3-io/baremetal-operator:apis/metal3.io/v1alpha1/baremetalhost_types.go BareMetalHostFinalizer
    CatalogueEntry(
        finalizer="baremetalhost.metal3.io",
        prefix=False,
        project="Metal3",
        owner=Owner("the Metal3 baremetal operator", markers=("baremetal-operator", "metal3")),
        runtime=METAL3,
        resources=(("metal3.io", "baremetalhosts"),),
        open_resources=False,
        cleanup="Deprovisions the physical host (power off, clean disks), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Deprovision the machine by hand through its BMC.",
        source="metal3-io/baremetal-operator:apis/metal3.io/v1alpha1/baremetalhost_types.go",
        unverified="the baremetal operator's workloads and Lease were not read",
    ),
    # pkg/shared_constants/finalizers.go:5-32
    CatalogueEntry(
        finalizer="service.k8s.aws/resources",
        prefix=False,
        project="AWS Load Balancer Controller",
        owner=AWS_LBC_OWNER,
        runtime=AWS_LBC,
        resources=(("", "services"),),
        open_resources=False,
        cleanup="Deletes the Service's NLB and target groups, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the load balancer, its target groups and security groups in AWS by hand.",
        source=AWS_LBC_SOURCE,
    ),
    CatalogueEntry(
        finalizer="ingress.k8s.aws/resources",
        prefix=False,
        project="AWS Load Balancer Controller",
        owner=AWS_LBC_OWNER,
        runtime=AWS_LBC,
        resources=(("networking.k8s.io", "ingresses"),),
        open_resources=False,
        cleanup="Deletes the Ingress's ALB (implicit group), then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the ALB, its target groups and security groups in AWS by hand.",
        source=AWS_LBC_SOURCE,
    ),
    CatalogueEntry(
        finalizer="group.ingress.k8s.aws/",
        prefix=True,
        project="AWS Load Balancer Controller",
        owner=AWS_LBC_OWNER,
        runtime=AWS_LBC,
        resources=(("networking.k8s.io", "ingresses"),),
        open_resources=False,
        cleanup="Takes the Ingress out of its IngressGroup's ALB (deleting the ALB with the last one).",
        creates_in_namespace=False,
        manual_cleanup="Remove the Ingress's rules from the group's ALB in AWS, or delete the ALB.",
        source=AWS_LBC_SOURCE,
    ),
    # gateway.k8s.aws/{gatewayclass,nlb,alb,targetgroupconfigurations,loadbalancerconfigurations,
    # listenerruleconfigurations}
    CatalogueEntry(
        finalizer="gateway.k8s.aws/",
        prefix=True,
        project="AWS Load Balancer Controller",
        owner=AWS_LBC_OWNER,
        runtime=AWS_LBC,
        resources=(
            ("gateway.networking.k8s.io", "gateways"),
            ("gateway.networking.k8s.io", "gatewayclasses"),
            ("gateway.k8s.aws", "targetgroupconfigurations"),
            ("gateway.k8s.aws", "loadbalancerconfigurations"),
            ("gateway.k8s.aws", "listenerruleconfigurations"),
        ),
        open_resources=False,
        cleanup="Deletes the Gateway's load balancer, or waits until no Gateway uses the configuration.",
        creates_in_namespace=False,
        manual_cleanup="Delete the Gateway's load balancer and target groups in AWS by hand.",
        source=AWS_LBC_SOURCE,
    ),
    # controllers/elbv2/targetgroupbinding_controller.go:53 targetGroupBindingFinalizer
    CatalogueEntry(
        finalizer="elbv2.k8s.aws/resources",
        prefix=False,
        project="AWS Load Balancer Controller",
        owner=AWS_LBC_OWNER,
        runtime=AWS_LBC,
        resources=(("elbv2.k8s.aws", "targetgroupbindings"),),
        open_resources=False,
        cleanup="Deregisters the pods or nodes from the AWS target group, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Deregister the targets from the AWS target group by hand.",
        source="kubernetes-sigs/aws-load-balancer-controller:controllers/elbv2/targetgroupbinding_controller.go:53",
    ),
    CatalogueEntry(
        finalizer="aga.k8s.aws/resources",
        prefix=False,
        project="AWS Load Balancer Controller",
        owner=AWS_LBC_OWNER,
        runtime=AWS_LBC,
        resources=(("aga.k8s.aws", "globalaccelerators"),),
        open_resources=False,
        cleanup="Deletes the AWS Global Accelerator, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the Global Accelerator in AWS by hand.",
        source=AWS_LBC_SOURCE,
    ),
    # kubernetes-sigs/karpenter:pkg/apis/v1/labels.go:64 TerminationFinalizer = Group + "/termination",
    # on Nodes (node/termination/controller.go) and NodeClaims (nodeclaim/lifecycle/controller.go)
    CatalogueEntry(
        finalizer="karpenter.sh/termination",
        prefix=False,
        project="Karpenter",
        owner=KARPENTER_OWNER,
        runtime=KARPENTER,
        resources=(("", "nodes"), ("karpenter.sh", "nodeclaims")),
        open_resources=False,
        cleanup="Drains the node and terminates its cloud instance, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Terminate the node's cloud instance by hand.",
        source="kubernetes-sigs/karpenter:pkg/apis/v1/labels.go:64",
    ),
    # aws/karpenter-provider-aws:pkg/apis/v1/labels.go:78, on EC2NodeClasses
    # (pkg/controllers/nodeclass/controller.go:216)
    CatalogueEntry(
        finalizer="karpenter.k8s.aws/termination",
        prefix=False,
        project="Karpenter",
        owner=KARPENTER_OWNER,
        runtime=KARPENTER,
        resources=(("karpenter.k8s.aws", "ec2nodeclasses"),),
        open_resources=False,
        cleanup="Waits for its NodeClaims, deletes its instance profiles and launch templates, then removes it.",
        creates_in_namespace=False,
        manual_cleanup="Delete the instance profiles and launch templates Karpenter made for the class in AWS.",
        source="aws/karpenter-provider-aws:pkg/apis/v1/labels.go:78",
    ),
)
