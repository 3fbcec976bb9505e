package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// A demo whose nodes are all stopped: the control API's routes and errors
// without processes (the end-to-end tests run real ones).
func stoppedDemo() *demo {
	voters, spares := demoIDs(3, 1)
	d := &demo{out: &lineWriter{w: io.Discard}, errOut: &lineWriter{w: io.Discard}, children: map[string]*child{}, order: append(voters, spares...)}
	for _, id := range d.order {
		d.children[id] = &child{id: id, url: "http://" + id + ".test", state: "stopped", lastExit: "signal: killed", spare: slices.Contains(spares, id)}
	}
	return d
}

// dashboardsOf lists the demo's node URLs, the origins its control API
// trusts.
func dashboardsOf(d *demo) []string {
	var urls []string
	for _, id := range d.order {
		urls = append(urls, d.children[id].url)
	}
	return urls
}

func TestControlAPI(t *testing.T) {
	d0 := stoppedDemo()
	h := guard(dashboardsOf(d0), d0.controlHandler(), hclog.NewNullLogger())
	tests := []struct {
		method, target string
		code           int
	}{
		{"GET", "/nodes", 200},
		{"POST", "/nodes/n2/kill", 200}, // already stopped: nothing to do
		{"POST", "/nodes/n9/kill", 404},
		{"POST", "/nodes/n1/dance", 404},
		{"POST", "/nodes/n9/wipe", 404},
		{"GET", "/nodes/n1/kill", 405},
		{"GET", "/", 503}, // no node runs: nowhere to redirect
	}
	for _, tt := range tests {
		// As the dashboard of n1 sends it: another origin, but a trusted one.
		req := httptest.NewRequest(tt.method, "http://control.test"+tt.target, nil)
		req.Header.Set("Origin", "http://n1.test")
		req.Header.Set("Sec-Fetch-Site", "same-site")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.code {
			t.Errorf("%s %s: status %d, want %d (%s)", tt.method, tt.target, rec.Code, tt.code, rec.Body)
		}
		if got := rec.Header().Get("Access-Control-Allow-Origin"); got != "http://n1.test" {
			t.Errorf("%s %s: Access-Control-Allow-Origin %q: the dashboard is served from another origin", tt.method, tt.target, got)
		}
	}
	rec := do(t, h, "GET", "/nodes", "")
	var states []nodeStateJSON
	if err := json.Unmarshal(rec.Body.Bytes(), &states); err != nil {
		t.Fatal(err)
	}
	if len(states) != 4 || states[0] != (nodeStateJSON{ID: "n1", URL: "http://n1.test", State: "stopped", LastExit: "signal: killed"}) ||
		states[3] != (nodeStateJSON{ID: "n4", URL: "http://n4.test", Spare: true, State: "stopped", LastExit: "signal: killed"}) {
		t.Errorf("states %+v", states)
	}

	// With a running node, / redirects to its dashboard.
	d := stoppedDemo()
	d.children["n2"].state = "running"
	rec = do(t, d.controlHandler(), "GET", "/", "")
	if rec.Code != http.StatusFound || rec.Header().Get("Location") != "http://n2.test/" {
		t.Errorf("GET /: %d to %q, want 302 to http://n2.test/", rec.Code, rec.Header().Get("Location"))
	}
}

// A web page of another origin cannot kill or restart nodes (403, nothing
// done), whether the browser sends Sec-Fetch-Site or only Origin; the
// same request from a node's dashboard (the positive control) works.
func TestControlAPIRefusesCrossOriginRequests(t *testing.T) {
	d := stoppedDemo()
	var killed []string
	d.out = &lineWriter{w: writerFunc(func(p []byte) (int, error) {
		killed = append(killed, string(p))
		return len(p), nil
	})}
	h := guard(dashboardsOf(d), d.controlHandler(), hclog.NewNullLogger())
	post := func(headers map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "http://control.test/nodes/n2/kill", nil)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, hdr := range []map[string]string{
		{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
		{"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"}, // another local service
		{"Origin": "https://evil.example"},                              // a browser without Sec-Fetch-Site
	} {
		rec := post(hdr)
		if rec.Code != http.StatusForbidden {
			t.Errorf("kill from %v: status %d, want 403", hdr, rec.Code)
		}
		if rec.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("kill from %v: CORS lets that origin read the answer", hdr)
		}
	}
	if len(killed) != 0 {
		t.Fatalf("a refused request reached the supervisor: %q", killed)
	}
	for _, hdr := range []map[string]string{
		{"Origin": "http://n3.test", "Sec-Fetch-Site": "same-site"}, // a node's dashboard
		{"Origin": "http://control.test"},                           // the control API's own origin
		{},                                                          // curl
	} {
		if rec := post(hdr); rec.Code != http.StatusOK {
			t.Errorf("kill from %v: status %d, want 200 (%s)", hdr, rec.Code, rec.Body)
		}
	}
	if len(killed) != 3 {
		t.Fatalf("accepted kills reached the supervisor %d times, want 3: %q", len(killed), killed)
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// The trusted origins of a loopback URL include its "localhost" alias
// (the same dashboard opened as http://localhost:PORT/), and nothing else.
func TestTrustedOriginsOfLoopbackURLs(t *testing.T) {
	h := guard([]string{"http://127.0.0.1:8081", "http://10.0.0.2:8081/"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), hclog.NewNullLogger())
	for origin, want := range map[string]int{
		"http://127.0.0.1:8081":  200,
		"http://localhost:8081":  200,
		"http://10.0.0.2:8081":   200,
		"http://localhost:8082":  403,
		"http://127.0.0.1:8082":  403,
		"http://localhost":       403,
		"https://127.0.0.1:8081": 403,
	} {
		req := httptest.NewRequest("POST", "http://control.test/nodes/n1/kill", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "same-site")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("POST from %s: %d, want %d", origin, rec.Code, want)
		}
	}
}
