package s3test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Action is what the fault proxy does with one request.
type Action int

const (
	// Pass forwards the request and its response.
	Pass Action = iota
	// DropResponse forwards the request, waits for the server's answer (so
	// a write has landed), then closes the client's connection without
	// answering: the client sees a lost connection after sending.
	DropResponse
	// Hang answers nothing and never forwards: the client times out, and a
	// write has not landed.
	Hang
	// Respond answers with an S3 error (Status, Code) without forwarding.
	Respond
	// CutBody forwards the request and the response headers, then closes
	// the connection halfway through the body.
	CutBody
)

// Decision is the proxy's choice for one request.
type Decision struct {
	Action Action
	Status int
	Code   string
}

// Proxy is an HTTP proxy in front of the test server that injects network
// and server faults into chosen requests, so the S3 backend's handling of
// lost responses, timeouts, throttling and conflicts is tested against the
// real server rather than a fake. It keeps the Host header, so SigV4
// signatures made for the proxy's address still verify upstream.
type Proxy struct {
	URL string

	srv    *httptest.Server
	mu     sync.Mutex
	decide func(r *http.Request) Decision
	log    []string
}

// NewProxy starts a proxy to upstream; decide (nil: pass everything) is
// called for every request. It stops when the test ends.
func NewProxy(t testing.TB, upstream string, decide func(r *http.Request) Decision) *Proxy {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{decide: decide}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := Decision{Action: Pass}
		p.mu.Lock()
		if p.decide != nil {
			d = p.decide(r)
		}
		p.log = append(p.log, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, d.Action))
		p.mu.Unlock()
		switch d.Action {
		case Hang:
			// Consume the body so the server notices when the client
			// gives up (it watches the connection only after that).
			_, _ = io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
			return
		case Respond:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(d.Status)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by the s3test proxy</Message></Error>`, d.Code)
			return
		}
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = target.Scheme, target.Host
		out.Host = r.Host
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if d.Action == DropResponse {
			_, _ = io.Copy(io.Discard, resp.Body)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		if d.Action == CutBody && resp.ContentLength > 1 {
			_, _ = io.CopyN(w, resp.Body, resp.ContentLength/2)
			rc := http.NewResponseController(w)
			_ = rc.Flush()
			if conn, _, err := rc.Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		_, _ = io.Copy(w, resp.Body)
	}))
	p.URL = p.srv.URL
	t.Cleanup(p.srv.Close)
	return p
}

// SetDecide replaces the decision function.
func (p *Proxy) SetDecide(decide func(r *http.Request) Decision) {
	p.mu.Lock()
	p.decide = decide
	p.mu.Unlock()
}

// Requests returns "METHOD PATH ACTION" for every request seen.
func (p *Proxy) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}
