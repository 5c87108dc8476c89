package v1alpha1

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// NewRESTClient is a REST client of faultline.io/v1alpha1 sharing client's
// connection (its transport, credentials and rate limiter): the clientset knows
// only the built-in groups.
func NewRESTClient(client kubernetes.Interface) (*rest.RESTClient, error) {
	core, ok := client.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || core == nil {
		return nil, errors.New("faultline.io client: the Kubernetes client has no REST client to share")
	}
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(scheme)
	base := core.Get().AbsPath("/").URL()
	rc, err := rest.NewRESTClient(base, "/apis/"+Group+"/"+Version, rest.ClientContentConfig{
		ContentType:  runtime.ContentTypeJSON,
		GroupVersion: SchemeGroupVersion,
		Negotiator:   runtime.NewClientNegotiator(codecs.WithoutConversion(), SchemeGroupVersion),
	}, core.GetRateLimiter(), core.Client)
	if err != nil {
		return nil, fmt.Errorf("faultline.io client: %w", err)
	}
	return rc, nil
}

// NewRESTClientForConfig is a REST client of faultline.io/v1alpha1 with rc's own
// connection settings and credentials (a caller's token, for a request made in the
// caller's name).
func NewRESTClientForConfig(rc *rest.Config) (*rest.RESTClient, error) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(rc)
	c.GroupVersion = &SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	rcl, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("faultline.io client: %w", err)
	}
	return rcl, nil
}
