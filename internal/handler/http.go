package handler

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"go.opentelemetry.io/otel/propagation"
)

// errBodyLimit is how much of a response body the http handler reads:
// the start of it goes into errors, the rest is drained so that the
// connection can be reused.
const (
	errBodyLimit   = 200
	drainBodyLimit = 64 << 10
)

// NewHTTPClient returns the client the http handlers share: pooled
// keep-alive connections, bounded dials and TLS handshakes, no overall
// timeout (each request is bound to its delivery's context, which ends at
// the topic's timeout), and redirects not followed (a 3xx is a failure:
// following it would turn the POST into a GET). It is safe for
// concurrent use.
func NewHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment,
			DialContext: (&net.Dialer{
				Timeout:   10 * time.Second,
				KeepAlive: 30 * time.Second,
			}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Sign returns the X-Delayq-Signature value of body: "sha256=" and the
// hex HMAC-SHA256 of body keyed with secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// HTTP returns a handler that POSTs each delivery's body to rawURL with
// client: 2xx acks, anything else is an error "http 503: <start of the
// response body>". headers are added to (and may override the
// Content-Type of) each request; when secret is not empty the body is
// signed (see Sign); the delivery's trace context goes in the
// traceparent header (see HeaderTraceparent).
func HTTP(client *http.Client, rawURL, secret string, headers map[string]string) (delayq.Handler, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("http handler: %q is not an http:// or https:// URL", rawURL)
	}
	h := &webhook{client: client, url: u.String(), secret: secret, headers: http.Header{}}
	for k, v := range headers {
		h.headers.Set(k, v)
	}
	return h.handle, nil
}

type webhook struct {
	client  *http.Client
	url     string
	secret  string
	headers http.Header
}

func (w *webhook) handle(ctx context.Context, d *delayq.Delivery) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(d.Body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("User-Agent", "delayq-worker")
	for k, vs := range w.headers {
		req.Header[k] = vs
	}
	req.Header.Set(HeaderTopic, d.Topic)
	req.Header.Set(HeaderID, d.ID)
	req.Header.Set(HeaderAttempt, formatAttempt(d.Attempt))
	req.Header.Set(HeaderDue, formatDue(d.Due))
	if w.secret != "" {
		req.Header.Set(HeaderSignature, Sign(w.secret, d.Body))
	}
	// The delivery's span is the parent of whatever the receiver traces.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := w.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the method and URL
		}
		return fmt.Errorf("post: %w", err)
	}
	defer func() {
		io.Copy(io.Discard, io.LimitReader(resp.Body, drainBodyLimit))
		resp.Body.Close()
	}()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	start, _ := io.ReadAll(io.LimitReader(resp.Body, errBodyLimit))
	msg := strings.TrimSpace(strings.ToValidUTF8(string(start), "?"))
	if msg == "" {
		return fmt.Errorf("http %d", resp.StatusCode)
	}
	return fmt.Errorf("http %d: %s", resp.StatusCode, msg)
}
