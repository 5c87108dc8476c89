package testenv

import (
	"context"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodToken returns what the kubelet mounts for a projected ServiceAccount token
// volume: a token of namespace/serviceAccount bound to a pod scheduled on node, for
// audiences (nil: the apiserver's own), valid for ten minutes. It makes sure the
// namespace, the ServiceAccount, the Node and the pod (<serviceAccount>-<node>, run by
// no kubelet) exist. The apiserver puts the pod's node into the token, so a
// TokenReview of it names the node (user.extra authentication.kubernetes.io/node-name).
func (e *Env) PodToken(t TB, namespace, serviceAccount, node string, audiences []string) string {
	t.Helper()
	cs := e.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	create := func(what string, err error) {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("testenv: create %s: %v", what, err)
		}
	}
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	create("namespace "+namespace, err)
	_, err = cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: serviceAccount}}, metav1.CreateOptions{})
	create("serviceaccount "+serviceAccount, err)
	_, err = cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
	create("node "+node, err)
	name := serviceAccount + "-" + node
	_, err = cs.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{ServiceAccountName: serviceAccount, NodeName: node,
			Containers: []corev1.Container{{Name: "main", Image: "faultline"}}},
	}, metav1.CreateOptions{})
	create("pod "+name, err)
	pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("testenv: get pod %s: %v", name, err)
	}
	exp := int64(600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: &exp,
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: TokenRequest for %s/%s bound to pod %s: %v", namespace, serviceAccount, name, err)
	}
	return tr.Status.Token
}
