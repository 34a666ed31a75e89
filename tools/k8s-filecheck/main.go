// k8s-filecheck runs the parsing code Kubernetes components run on the key, certificate, kubeconfig and
// encryption-configuration files they are given, so that ha-sim judges those files with upstream's code rather
// than a re-implementation.
//
// Request on stdin:  {"checks":[{"id":"kube-apiserver --service-account-key-file","kind":"public-keys","paths":["/abs/file"]}]}
// Answer on stdout:  {"results":[{"id":"...","ok":false,"error":"<upstream's error text>"}]}
// One result per check, in request order. Exit 0 whenever the request was well-formed (whatever the checks
// found); exit 2, with the reason on stderr, when it was not (bad JSON, unknown kind, wrong number of paths,
// a path that is not absolute, a duplicate id).
//
// Each kind calls exactly the upstream function(s) the component calls for the flag; it checks nothing more.
package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	apiserverconfig "k8s.io/apiserver/pkg/apis/config"
	apiserverconfigv1 "k8s.io/apiserver/pkg/apis/config/v1"
	"k8s.io/apiserver/pkg/apis/config/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

type check struct {
	ID    string   `json:"id"`
	Kind  string   `json:"kind"`
	Paths []string `json:"paths"`
}

type request struct {
	Checks []check `json:"checks"`
}

type result struct {
	ID    string `json:"id"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

type answer struct {
	Results []result `json:"results"`
}

// kinds maps each kind to the number of paths it takes and the upstream call it makes.
var kinds = map[string]struct {
	paths int
	run   func(paths []string) error
}{
	// kube-apiserver --service-account-key-file: pkg/serviceaccount's key loading calls
	// keyutil.PublicKeysFromFile (ParsePublicKeysPEM: PKCS#1 or PKCS#8 RSA private keys, PKIX public keys or
	// certificates, SEC1 EC private keys; not PKCS#8 EC private keys).
	"public-keys": {1, func(p []string) error {
		_, err := keyutil.PublicKeysFromFile(p[0])
		return err
	}},
	// kube-apiserver --service-account-signing-key-file and kube-controller-manager
	// --service-account-private-key-file: keyutil.PrivateKeyFromFile (ParsePrivateKeyPEM: PKCS#1, SEC1, PKCS#8).
	"private-key": {1, func(p []string) error {
		_, err := keyutil.PrivateKeyFromFile(p[0])
		return err
	}},
	// CA bundles (--client-ca-file, --root-ca-file, --requestheader-client-ca-file, ...): certutil.CertsFromFile,
	// i.e. os.ReadFile + certutil.ParseCertsPEM, the parse the apiserver's dynamiccertificates CA loader runs on
	// the file's bytes. Upstream does not check that the certificates are CAs (IsCA), unexpired, or that any
	// chain verifies when loading, so neither does this. (The apiserver's --etcd-cafile goes through etcd's
	// client/pkg/transport, which decodes PEM blocks with encoding/pem + x509.ParseCertificate: same outcome for a
	// file of certificates, different error text.)
	"cert-bundle": {1, func(p []string) error {
		_, err := certutil.CertsFromFile(p[0])
		return err
	}},
	// Certificate + private key (--tls-cert-file/--tls-private-key-file, --kubelet-client-certificate/key,
	// --etcd-certfile/--etcd-keyfile, a kubeconfig's client-certificate/client-key): paths are [cert, key].
	// tls.LoadX509KeyPair is os.ReadFile of both + tls.X509KeyPair, which is what the apiserver's
	// dynamiccertificates.DynamicCertKeyPairContent (loadCertKeyPair) and client-go's transport.TLSConfigFor
	// (after loadTLSFiles) call, and etcd's client/pkg/tlsutil.NewCert. It checks that the key parses and
	// matches the certificate's public key; not validity dates or usages. (Only the apiserver's serving-cert loader
	// first rejects an empty file, with "missing content for serving cert"; here an empty file fails in
	// tls.X509KeyPair with its own "failed to find any PEM data" error.)
	"key-pair": {2, func(p []string) error {
		_, err := tls.LoadX509KeyPair(p[0], p[1])
		return err
	}},
	// --kubeconfig of kube-controller-manager, kube-scheduler, cluster-autoscaler, ...: clientcmd.BuildConfigFromFlags("",
	// path) (what kube-controller-manager calls; the scheduler's NewNonInteractiveDeferredLoadingClientConfig with
	// ExplicitPath is the same) loads and validates the kubeconfig (current context, cluster, user, readable
	// certificate-authority / client-certificate / client-key files, relative paths resolved against the file's
	// directory), then rest.TLSConfigFor, which every client built from that config runs first: it reads the
	// referenced files and parses the CA bundle. A client key pair given as files is only loaded (tls.LoadX509KeyPair,
	// transport's cachingCertificateLoader) when a TLS handshake asks for the client certificate, so this then
	// calls the config's GetClientCertificate as crypto/tls would. It does not contact the server.
	"kubeconfig": {1, func(p []string) error {
		cfg, err := clientcmd.BuildConfigFromFlags("", p[0])
		if err != nil {
			return err
		}
		tlsCfg, err := rest.TLSConfigFor(cfg)
		if err != nil || tlsCfg == nil || tlsCfg.GetClientCertificate == nil {
			return err
		}
		_, err = tlsCfg.GetClientCertificate(&tls.CertificateRequestInfo{})
		return err
	}},
	// kube-apiserver --encryption-provider-config: see encryptionConfig.
	"encryption-config": {1, encryptionConfig},
}

// encryptionConfig is the decode and validation half of the apiserver's
// k8s.io/apiserver/pkg/server/options/encryptionconfig loadConfig, copied call for call: a scheme holding only the
// apiserver.config.k8s.io internal and v1 types, the codec factory's UniversalDecoder (YAML or JSON, converted to
// the internal type; not strict, so unknown fields are dropped as the apiserver drops them, and a provider entry
// left with none of the known providers is then rejected by validation), then
// validation.ValidateEncryptionConfiguration's errors as one aggregate. The loader package itself is not imported:
// it also builds the transformers, and its KMS envelope pulls in gRPC; the key checks that matter for a file
// (base64, key lengths per provider, one provider per element, at least one resource and provider) are all in
// validation. The source is Debian's golang-k8s-apiserver-dev, Kubernetes 1.20's apiserver module (the newest
// Debian packages): newer apiservers first reject an empty file, decode the same way, and validate more (resource
// names and wildcards, unique KMS names, KMS v2), which this does not. The apiserver wraps the error with the
// file's path (1.20: `error while parsing encryption provider configuration file "<path>": error while parsing
// file: `; the wording varies by release); this reports the inner text, like the other kinds. One difference in
// it: a wrong apiVersion or kind fails with `no kind "X" is registered for version "G/V" in scheme
// "<file>:<line>"`, and runtime.NewScheme names a scheme after its call site, so that is this file's line, not the
// apiserver's.
func encryptionConfig(p []string) error {
	data, err := os.ReadFile(p[0])
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	codecs := serializer.NewCodecFactory(scheme)
	// 1.20 ignores these errors and later releases panic on them; they only fail on a type registered twice,
	// which cannot happen here.
	if err := apiserverconfig.AddToScheme(scheme); err != nil {
		return err
	}
	if err := apiserverconfigv1.AddToScheme(scheme); err != nil {
		return err
	}
	obj, gvk, err := codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return err
	}
	cfg, ok := obj.(*apiserverconfig.EncryptionConfiguration)
	if !ok {
		return fmt.Errorf("got unexpected config type: %v", gvk)
	}
	// ToAggregate is a nil interface for an empty list, so a valid file is a nil error.
	return validation.ValidateEncryptionConfiguration(cfg).ToAggregate()
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "k8s-filecheck: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	if len(os.Args) != 1 {
		fail("takes no arguments; reads a JSON request on stdin")
	}
	dec := json.NewDecoder(os.Stdin)
	dec.DisallowUnknownFields()
	var req request
	if err := dec.Decode(&req); err != nil {
		fail("malformed request: %v", err)
	}
	if dec.More() {
		fail("malformed request: trailing data after the JSON object")
	}
	seen := map[string]bool{}
	for i, c := range req.Checks {
		k, ok := kinds[c.Kind]
		if !ok {
			fail("check %d (%q): unknown kind %q", i, c.ID, c.Kind)
		}
		if c.ID == "" || seen[c.ID] {
			fail("check %d: id %q is empty or repeated", i, c.ID)
		}
		seen[c.ID] = true
		if len(c.Paths) != k.paths {
			fail("check %q: kind %s takes %d path(s), got %d", c.ID, c.Kind, k.paths, len(c.Paths))
		}
		for _, p := range c.Paths {
			if !filepath.IsAbs(p) {
				fail("check %q: path %q is not absolute", c.ID, p)
			}
		}
	}
	ans := answer{Results: make([]result, 0, len(req.Checks))}
	for _, c := range req.Checks {
		r := result{ID: c.ID, OK: true}
		if err := kinds[c.Kind].run(c.Paths); err != nil {
			r.OK, r.Error = false, err.Error()
		}
		ans.Results = append(ans.Results, r)
	}
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(ans); err != nil {
		fail("writing the answer: %v", err)
	}
}
