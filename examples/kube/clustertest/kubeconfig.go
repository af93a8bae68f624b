package clustertest

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// WriteKubeconfig writes a kubeconfig file at path for the client
// configuration cfg (as AdminConfig or NodeConfig return: a server, its CA
// and a client certificate, or a bearer token), with one context,
// "podkit", that is current. The file holds the credential: it is written
// with mode 0600.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	if cfg == nil || cfg.Host == "" {
		return errors.New("clustertest: WriteKubeconfig: no server in the configuration")
	}
	kc := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"podkit": {
			Server:                   cfg.Host,
			CertificateAuthorityData: cfg.CAData,
			CertificateAuthority:     cfg.CAFile,
			TLSServerName:            cfg.ServerName,
		}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"podkit": {
			ClientCertificateData: cfg.CertData,
			ClientKeyData:         cfg.KeyData,
			ClientCertificate:     cfg.CertFile,
			ClientKey:             cfg.KeyFile,
			Token:                 cfg.BearerToken,
		}},
		Contexts:       map[string]*clientcmdapi.Context{"podkit": {Cluster: "podkit", AuthInfo: "podkit"}},
		CurrentContext: "podkit",
	}
	if err := clientcmd.WriteToFile(kc, path); err != nil {
		return fmt.Errorf("clustertest: writing the kubeconfig: %w", err)
	}
	return nil
}
