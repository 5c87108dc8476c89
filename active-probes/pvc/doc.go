// Package pvc is the storage probe: it creates a PersistentVolumeClaim of a storage
// class, waits until it is Bound, deletes it and waits until it is gone — the path a
// training job's checkpoint volume takes. It runs in the controller (it needs the
// API, not a node) through the same probe framework as the node probes, so it has
// the same parameter checks, timeouts and metrics.
//
// # Running it
//
// The probe is not in the node probes' default registry (probe.Default) and is neither
// default-enabled nor invasive. The controller adds it to a registry of its own:
//
//	reg := probe.NewRegistry()
//	reg.MustRegister(pvc.Spec(client, namespace)) // namespace: where claims go by default
//	runner := probe.NewRunner(reg, probe.Config{}, probe.NewMetrics(promRegistry))
//	res, err := runner.Run(ctx, "pvc", probe.Params{"storage_class": "fast-nvme"})
//
// Parameters:
//
//	storage_class  required; the StorageClass of the claim (a DNS-1123 subdomain)
//	size           requested storage, a resource quantity (default 1Gi, at most 100Gi)
//	namespace      where the claim is created (default: the namespace given to Spec)
//	timeout        how long the claim may take to bind (default 2m, at most 20m)
//	access_mode    ReadWriteOnce (default), ReadOnlyMany, ReadWriteMany or ReadWriteOncePod
//
// # Result
//
// One result for the cluster (Node ""), with one device whose ID is the storage class:
//
//	pass   the claim bound within the timeout; values bind_seconds and delete_seconds
//	fail   it did not bind in time; the message names the class, the claim's phase and
//	       its last Event (ProvisioningFailed: ..., FailedBinding: ...)
//	warn   it bound, but was not gone within the cleanup timeout after its deletion
//	       (a finalizer still holds it)
//	error  an API error (Forbidden, a namespace that does not exist, ...), a cancelled
//	       caller, or a deletion the API refused
//
// The wait is a watch from the claim's resourceVersion (re-established from a fresh
// read when the server ends it), never polling.
//
// # Cleanup
//
// Every claim carries the labels app.kubernetes.io/managed-by=faultline and
// faultline.io/probe=pvc and is deleted on every path — bound, timed out, API error,
// cancelled caller, panic — with a context of its own (CleanupTimeout, default 30s), so
// a caller that went away does not leave a claim behind. A claim left by a controller
// that died mid-probe is deleted by Sweep, which each run calls first for claims older
// than SweepAge (longer than any run can last, so a run in progress on another replica
// keeps its claim).
//
// # Permissions
//
// RoleYAML (role.yaml) is the Role the probe needs in the namespace of its claims:
// persistentvolumeclaims create, list, watch and delete, and events list (to say why a
// claim did not bind). A claim is re-read with a list by name, so get is not needed.
// The package's tests run the probe as a ServiceAccount bound to exactly that Role
// against a real kube-apiserver and kube-controller-manager, then remove each
// permission in turn and show the probe no longer works without it.
package pvc
