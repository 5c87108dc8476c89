package testenv

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultControllers are the kube-controller-manager controllers run when
// Options.Controllers is empty: what binding a PersistentVolumeClaim needs.
var DefaultControllers = []string{
	"persistentvolume-binder-controller",
	"persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller",
	"persistentvolume-expander-controller",
}

// ServiceAccountIssuer is the issuer of the tokens the test apiserver mints.
const ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

type kubeState struct {
	host       string // https://127.0.0.1:<port>
	token      string // admin bearer token (group system:masters)
	caData     []byte // PEM of the apiserver's self-generated serving certificate chain
	kubeconfig string
	clientset  *kubernetes.Clientset
}

func randomToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func (e *Env) startKubernetes(bins map[Component]string, o Options) error {
	dir := filepath.Join(e.dir, "kubernetes")
	certDir := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		return err
	}
	ks := &kubeState{token: randomToken()}

	// Static token file: one admin in system:masters.
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(ks.token+`,admin,admin-uid,"system:masters"`+"\n"), 0o600); err != nil {
		return err
	}
	// Service-account signing key pair.
	saKey, saPub := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := writeRSAKeyPair(saKey, saPub); err != nil {
		return err
	}

	// etcd
	etcdDir := filepath.Join(dir, "etcd")
	var etcdURL string
	err := e.launch(Etcd, func() (procSpec, error) {
		ports, err := freePorts(2)
		if err != nil {
			return procSpec{}, err
		}
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		etcdURL = client
		return procSpec{
			name: Etcd, path: bins[Etcd], dir: dir, logPath: e.LogPath(Etcd),
			args: []string{
				"--name=testenv", "--data-dir=" + etcdDir,
				"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
				"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
				"--initial-cluster=testenv=" + peer,
				"--unsafe-no-fsync", "--log-level=warn",
				// A single member: elect itself quickly instead of after about a second.
				"--heartbeat-interval=50", "--election-timeout=250",
			},
			ready:        httpReady(http.DefaultClient, client+"/health", nil, `"health":"true"`),
			readyTimeout: 30 * time.Second,
			stopGrace:    5 * time.Second,
		}, nil
	})
	if err != nil {
		return err
	}

	// kube-apiserver; it writes a self-signed serving certificate (apiserver.crt,
	// for localhost and 127.0.0.1) into --cert-dir on its first start and reuses it.
	crt := filepath.Join(certDir, "apiserver.crt")
	err = e.launch(APIServer, func() (procSpec, error) {
		ports, err := freePorts(1)
		if err != nil {
			return procSpec{}, err
		}
		ks.host = "https://127.0.0.1:" + strconv.Itoa(ports[0])
		return procSpec{
			name: APIServer, path: bins[APIServer], dir: dir, logPath: e.LogPath(APIServer),
			args: []string{
				"--etcd-servers=" + etcdURL,
				"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
				"--secure-port=" + strconv.Itoa(ports[0]),
				"--cert-dir=" + certDir,
				"--token-auth-file=" + tokens,
				"--authorization-mode=RBAC",
				"--service-account-issuer=" + ServiceAccountIssuer,
				"--service-account-key-file=" + saPub,
				"--service-account-signing-key-file=" + saKey,
				"--service-cluster-ip-range=10.0.0.0/24",
				"--disable-admission-plugins=ServiceAccount",
				"--allow-privileged=true",
				"--profiling=false",
			},
			ready:        apiserverReady(ks.host+"/readyz", crt, ks.token),
			readyTimeout: 90 * time.Second,
			stopGrace:    10 * time.Second,
		}, nil
	})
	if err != nil {
		return err
	}
	ks.caData, err = os.ReadFile(crt)
	if err != nil {
		return err
	}
	ks.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(ks.kubeconfig, ks.host, ks.caData, ks.token); err != nil {
		return err
	}
	ks.clientset, err = kubernetes.NewForConfig(ks.restConfig())
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.kube = ks
	e.mu.Unlock()

	if !o.ControllerManager {
		return nil
	}
	controllers := o.Controllers
	if len(controllers) == 0 {
		controllers = DefaultControllers
	}
	kcmDir := filepath.Join(dir, "controller-manager")
	if err := os.MkdirAll(kcmDir, 0o755); err != nil {
		return err
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	return e.launch(ControllerManager, func() (procSpec, error) {
		ports, err := freePorts(1)
		if err != nil {
			return procSpec{}, err
		}
		return procSpec{
			name: ControllerManager, path: bins[ControllerManager], dir: kcmDir, logPath: e.LogPath(ControllerManager),
			args: []string{
				"--kubeconfig=" + ks.kubeconfig,
				"--controllers=" + strings.Join(controllers, ","),
				"--use-service-account-credentials=false",
				"--leader-elect=false",
				"--bind-address=127.0.0.1",
				"--secure-port=" + strconv.Itoa(ports[0]),
				"--cert-dir=" + kcmDir,
				"--service-account-private-key-file=" + saKey,
				"--root-ca-file=" + crt,
				// Claims and volumes that arrive in an unlucky order wait for the next
				// periodic sync (15 s by default).
				"--pvclaimbinder-sync-period=1s",
				"--profiling=false",
			},
			// /healthz is in --authorization-always-allow-paths; the serving cert is self-signed.
			ready:        httpReady(insecure, fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0]), nil, "ok"),
			readyTimeout: 60 * time.Second,
			stopGrace:    5 * time.Second,
		}, nil
	})
}

func writeRSAKeyPair(keyPath, pubPath string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	return os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// apiserverReady polls /readyz once the serving certificate exists.
func apiserverReady(url, caFile, token string) func(context.Context) error {
	var client *http.Client
	return func(ctx context.Context) error {
		if client == nil {
			pemData, err := os.ReadFile(caFile)
			if err != nil {
				return fmt.Errorf("no serving certificate yet: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pemData) {
				return fmt.Errorf("no certificate in %s yet", caFile)
			}
			client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		}
		return httpReady(client, url, map[string]string{"Authorization": "Bearer " + token}, "ok")(ctx)
	}
}

// httpReady returns a readiness probe: GET url answers 200 and its body contains want.
func httpReady(client *http.Client, url string, header map[string]string, want string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			return fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, body)
		}
		return nil
	}
}

func writeKubeconfig(path, host string, caData []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: caData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "admin"}
	cfg.CurrentContext = "testenv"
	return clientcmd.WriteToFile(*cfg, path)
}

func (ks *kubeState) restConfig() *rest.Config {
	return &rest.Config{
		Host:            ks.host,
		BearerToken:     ks.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), ks.caData...)},
		QPS:             100,
		Burst:           200,
		Timeout:         30 * time.Second,
	}
}

func (e *Env) kubeOrPanic() *kubeState {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.kube == nil {
		panic("testenv: Kubernetes was not started (set Options.Kubernetes)")
	}
	return e.kube
}

// RESTConfig returns a new client configuration for the admin user (static bearer
// token, group system:masters), trusting the apiserver's self-generated certificate.
func (e *Env) RESTConfig() *rest.Config { return e.kubeOrPanic().restConfig() }

// RESTConfigForToken returns a client configuration that authenticates with token
// (for example one from ServiceAccountToken) instead of the admin's.
func (e *Env) RESTConfigForToken(token string) *rest.Config {
	cfg := e.RESTConfig()
	cfg.BearerToken = token
	return cfg
}

// Clientset returns an admin clientset.
func (e *Env) Clientset() *kubernetes.Clientset { return e.kubeOrPanic().clientset }

// Kubeconfig returns the path of an admin kubeconfig file for kubectl, helm or any
// client that loads kubeconfig files.
func (e *Env) Kubeconfig() string { return e.kubeOrPanic().kubeconfig }

// APIServerURL returns the https URL of kube-apiserver.
func (e *Env) APIServerURL() string { return e.kubeOrPanic().host }

// ServiceAccountToken makes sure namespace and the ServiceAccount exist and returns a
// token for it minted with the TokenRequest API (valid for an hour). The account has
// no permissions until the test grants some with RBAC.
func (e *Env) ServiceAccountToken(t TB, namespace, name string) string {
	t.Helper()
	cs := e.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("testenv: create namespace %s: %v", namespace, err)
	}
	_, err = cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("testenv: create serviceaccount %s/%s: %v", namespace, name, err)
	}
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: TokenRequest for %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}
