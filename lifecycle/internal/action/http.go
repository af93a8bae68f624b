package action

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// kubeVersion is the Kubernetes minor version podkit follows, used in the
// User-Agent of probes and hooks ("kube-probe/1.37"), as the kubelet
// sends its own.
const kubeVersion = "1.37"

// maxRedirects is how many same-host redirects a request follows before
// it fails, as the kubelet's (and net/http's) 10.
const maxRedirects = 10

// HTTP runs httpGet actions with the kubelet's client rules: no proxy, no
// keep-alive, no compression, HTTPS without certificate verification,
// redirects followed only to the same host (a redirect elsewhere ends the
// request with the redirect response), at most MaxOutput bytes of a body
// read. It holds no connection between requests, so it needs no closing.
type HTTP struct {
	userAgent string
	plain     *http.Transport // HTTP/1.1, and HTTP/2 over TLS by ALPN
	h2c       *http.Transport // HTTP/2 over cleartext, with prior knowledge
}

// NewHTTP returns an HTTP whose requests carry the User-Agent
// "kube-<purpose>/1.37" unless the action sets its own: purpose is "probe"
// for probes and "lifecycle" for hooks, as the kubelet's.
func NewHTTP(purpose string) *HTTP {
	tr := func() *http.Transport {
		return &http.Transport{
			Proxy:              nil, // never the node's proxy
			DialContext:        dialer().DialContext,
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet's rule: probes do not verify
			DisableKeepAlives:  true,
			DisableCompression: true,
			ForceAttemptHTTP2:  true,
		}
	}
	h := &HTTP{userAgent: "kube-" + purpose + "/" + kubeVersion, plain: tr(), h2c: tr()}
	h.h2c.Protocols = new(http.Protocols)
	h.h2c.Protocols.SetUnencryptedHTTP2(true)
	return h
}

// Probe runs get against the container c (whose named ports resolve
// get.Port) at host (get.Host wins when set) and returns the kubelet's
// httpGet probe result: Success with the body for a status of 200–299,
// Warning for a 3xx (a redirect to another host, not followed), Failure
// "HTTP probe failed with statuscode: N" for any other status (the body
// is not in the message: it may hold secrets), Failure with the error for
// a request that fails (a timeout by WithTimeout says so), Unknown when
// the request cannot be made (an unknown port name, no host).
func (h *HTTP) Probe(ctx context.Context, get *v1.HTTPGetAction, c *v1.Container, host string) Result {
	req, err := h.request(ctx, get, c, host)
	if err != nil {
		return unknown(err)
	}
	resp, err := h.client(get).Do(req)
	if err != nil {
		return failure(requestError(ctx, req, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxOutput))
	if err != nil {
		return failure(requestError(ctx, req, err))
	}
	switch {
	case resp.StatusCode >= http.StatusOK && resp.StatusCode < http.StatusMultipleChoices:
		return Result{Outcome: Success, Output: string(body)}
	case resp.StatusCode >= http.StatusMultipleChoices && resp.StatusCode < http.StatusBadRequest:
		return Result{Outcome: Warning, Output: fmt.Sprintf("Probe terminated redirects, Response body: %s", body)}
	}
	return failure(fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode))
}

// Hook runs get for a lifecycle hook, by the kubelet's rules: the request
// must get a response, whatever its status (the kubelet does not read the
// status of a hook's response); an HTTPS request answered in plain HTTP
// is sent again as HTTP, without its Authorization header, and fellBack
// reports that this second request got a response. err is the request's
// error, or the reason no request could be made.
func (h *HTTP) Hook(ctx context.Context, get *v1.HTTPGetAction, c *v1.Container, host string) (fellBack bool, err error) {
	req, err := h.request(ctx, get, c, host)
	if err != nil {
		return false, err
	}
	resp, err := h.client(get).Do(req)
	discard(resp)
	if err == nil || req.URL.Scheme != "https" || !answeredInHTTP(err) {
		if err != nil {
			err = errors.New(requestError(ctx, req, err))
		}
		return false, err
	}
	plain := req.Clone(ctx)
	plain.URL.Scheme = "http"
	plain.Header.Del("Authorization")
	resp, err2 := h.client(get).Do(plain)
	discard(resp)
	if err2 != nil {
		return false, errors.New(requestError(ctx, req, err))
	}
	return true, nil
}

// client returns a client for get's protocol.
func (h *HTTP) client(get *v1.HTTPGetAction) *http.Client {
	t := h.plain
	if get.Protocol != nil && *get.Protocol == v1.HTTPProtocolHTTP2 && !strings.EqualFold(string(get.Scheme), "https") {
		t = h.h2c
	}
	return &http.Client{Transport: t, CheckRedirect: sameHostRedirects}
}

// request builds get's request as the kubelet does: scheme lowercased
// (HTTP by default), host from get.Host or the given host, the path
// parsed as a URL reference (kept as a bare path when it does not parse),
// get's headers, then a default User-Agent and "Accept: */*" unless get
// sets them (an empty Accept removes the header), and a Host header used
// as the request's host.
func (h *HTTP) request(ctx context.Context, get *v1.HTTPGetAction, c *v1.Container, host string) (*http.Request, error) {
	if get == nil {
		return nil, errors.New("no httpGet action")
	}
	port, err := ResolvePort(get.Port, c)
	if err != nil {
		return nil, err
	}
	if get.Host != "" {
		host = get.Host
	}
	if host == "" {
		return nil, errors.New("no host to connect to: the action sets none and the pod has no IP")
	}
	scheme := strings.ToLower(string(get.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u, err := url.Parse(get.Path)
	if err != nil {
		u = &url.URL{Path: get.Path}
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	headers := make(http.Header, len(get.HTTPHeaders)+2)
	for _, hd := range get.HTTPHeaders {
		headers.Add(hd.Name, hd.Value)
	}
	if _, ok := headers["User-Agent"]; !ok {
		headers.Set("User-Agent", h.userAgent)
	}
	if _, ok := headers["Accept"]; !ok {
		headers.Set("Accept", "*/*")
	} else if headers.Get("Accept") == "" {
		headers.Del("Accept")
	}
	req.Header = headers
	req.Host = headers.Get("Host")
	return req, nil
}

// sameHostRedirects follows a redirect only to the host of the first
// request, at most maxRedirects times; a redirect elsewhere ends with its
// own response.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

// requestError is the message of a failed request: the client's error,
// or for a request cut by WithTimeout's timeout the message the kubelet's
// client timeout gives.
func requestError(ctx context.Context, req *http.Request, err error) string {
	if TimedOut(ctx) {
		return (&url.Error{Op: "Get", URL: req.URL.String(), Err: errHTTPTimeout}).Error()
	}
	return err.Error()
}

var errHTTPTimeout = errors.New("context deadline exceeded (Client.Timeout exceeded while awaiting headers)")

// answeredInHTTP reports whether err is an HTTPS request's that got a
// plain HTTP answer.
func answeredInHTTP(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue) && strings.Contains(ue.Err.Error(), "server gave HTTP response to HTTPS client")
}

// discard reads at most MaxOutput bytes of resp's body and closes it.
func discard(resp *http.Response) {
	if resp == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxOutput))
	_ = resp.Body.Close()
}
