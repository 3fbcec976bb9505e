package replogadmin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/replogtest"
)

// openLog opens a single-node Log (no peers: it leads at once).
func openLog(t *testing.T) *replog.Log {
	t.Helper()
	l, err := replog.Open(replog.Options{NodeID: "n1", Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if err := l.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l
}

// serve mounts the handler of l under /admin/, as a service would.
func serve(t *testing.T, l *replog.Log, opts Options) string {
	t.Helper()
	h, err := New(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/admin"
}

// call makes a request and decodes the JSON answer into v (if not nil);
// it returns the status code and the raw body.
func call(t *testing.T, method, url string, v any) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, url, ct)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, url, resp.StatusCode, body, err)
		}
	}
	return resp.StatusCode, string(body)
}

// wantError checks an error answer: its status and code.
func wantError(t *testing.T, method, url string, status int, code string) apiError {
	t.Helper()
	var e apiError
	got, body := call(t, method, url, &e)
	if got != status || e.Code != code || e.Error == "" {
		t.Errorf("%s %s: %d %s; want %d with code %q and a message", method, url, got, body, status, code)
	}
	return e
}

func appendAll(t *testing.T, l *replog.Log, recs ...string) []uint64 {
	t.Helper()
	var offs []uint64
	for _, r := range recs {
		off, err := l.Append(context.Background(), []byte(r))
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	return offs
}

func TestReadRoutes(t *testing.T) {
	l := openLog(t)
	appendAll(t, l, "a", "b")
	base := serve(t, l, Options{})

	var st replog.Status
	if code, body := call(t, "GET", base+"/status", &st); code != 200 || st.NodeID != "n1" || st.Role != replog.RoleLeader || st.HighWatermark == 0 {
		t.Errorf("GET /status: %d %s", code, body)
	}
	var vs VotersJSON
	if code, body := call(t, "GET", base+"/voters", &vs); code != 200 || len(vs.Voters) != 1 || vs.Voters[0].ID != "n1" || vs.Voters[0].DirectoryID == "" || vs.LeaderID != "n1" {
		t.Errorf("GET /voters: %d %s", code, body)
	}
	var fs FollowersJSON
	if code, body := call(t, "GET", base+"/followers", &fs); code != 200 || fs.LeaderID != "n1" || fs.Followers == nil || len(fs.Followers) != 0 || fs.LEO != st.LEO {
		t.Errorf("GET /followers of a single node: %d %s; want the leader with no followers", code, body)
	}
	var stats replog.Stats
	if code, body := call(t, "GET", base+"/stats", &stats); code != 200 || stats.NodeID != "n1" || stats.Appends != 2 || stats.AppendBytes != 2 || stats.CommitLatency.Count == 0 {
		t.Errorf("GET /stats: %d %s", code, body)
	}
	var idx indexJSON
	if code, body := call(t, "GET", base+"/", &idx); code != 200 || idx.ChangesAllowed || len(idx.Routes) != 6 {
		t.Errorf("GET /: %d %s; want the six read routes", code, body)
	}
	// Mounted with StripPrefix, /admin without the slash is the index too
	// (the mux redirects it).
	if code, _ := call(t, "GET", base, &idx); code != 200 {
		t.Errorf("GET /admin: %d", code)
	}
	if code, _ := call(t, "HEAD", base+"/status", nil); code != 200 {
		t.Errorf("HEAD /status: %d", code)
	}

	wantError(t, "GET", base+"/nope", 404, codeNotFound)
	wantError(t, "POST", base+"/status", 405, codeMethodNotAllowed)
	wantError(t, "GET", base+"/voters/add?node=n2", 405, codeMethodNotAllowed)
}

// Paging through the log returns every committed record once, in order,
// with next skipping the offsets of control entries; limit and the byte
// bound cut pages; from below the log start is 416 naming it.
func TestEntries(t *testing.T) {
	l := openLog(t)
	var want []string
	for i := range 25 {
		want = append(want, fmt.Sprintf("record %d", i))
	}
	offs := appendAll(t, l, want[:10]...)
	if err := l.Barrier(context.Background()); err != nil { // a control entry among the records
		t.Fatal(err)
	}
	offs = append(offs, appendAll(t, l, want[10:]...)...)
	base := serve(t, l, Options{MaxPageEntries: 7, MaxPageBytes: 30})

	hw := l.Status().ReadableHW
	var got []string
	from, pages := uint64(0), 0
	for {
		var p PageJSON
		if code, body := call(t, "GET", fmt.Sprintf("%s/entries?from=%d&limit=100", base, from), &p); code != 200 {
			t.Fatalf("GET /entries?from=%d: %d %s", from, code, body)
		}
		if len(p.Entries) > 3 {
			// 30 bytes hold three 8- or 9-byte records.
			t.Fatalf("a page of %d entries", len(p.Entries))
		}
		for _, e := range p.Entries {
			if e.Offset < from || e.Offset >= p.Next || e.Offset >= hw || e.Time.IsZero() {
				t.Fatalf("entry %+v in the page [%d, %d), hw %d", e, from, p.Next, hw)
			}
			got = append(got, string(e.Data))
		}
		if p.HW != hw || p.LogStart != 0 {
			t.Fatalf("page hw %d log start %d; want %d, 0", p.HW, p.LogStart, hw)
		}
		pages++
		if len(p.Entries) == 0 {
			if p.Next != hw || from < hw {
				t.Fatalf("an empty page at %d with next %d; hw %d", from, p.Next, hw)
			}
			break
		}
		from = p.Next
	}
	if strings.Join(got, ",") != strings.Join(want, ",") || pages < 9 {
		t.Fatalf("paged %d times: %q\nwant %q", pages, got, want)
	}
	// The page that reaches the HW says so: next is the HW, not the last
	// offset + 1, even when control entries sit between.
	var p PageJSON
	call(t, "GET", fmt.Sprintf("%s/entries?from=%d&limit=1", base, offs[24]), &p)
	if len(p.Entries) != 1 || p.Next != offs[24]+1 {
		t.Errorf("the last entry: %+v", p)
	}

	// A record larger than the byte bound still comes, alone.
	big := strings.Repeat("x", 100)
	bigOff := appendAll(t, l, big, "small")[0]
	call(t, "GET", fmt.Sprintf("%s/entries?from=%d", base, bigOff), &p)
	if len(p.Entries) != 1 || string(p.Entries[0].Data) != big || p.Next != bigOff+1 {
		t.Errorf("a page starting with a record above MaxPageBytes: %d entries, next %d", len(p.Entries), p.Next)
	}

	for _, q := range []string{"from=x", "limit=0", "limit=-1", "wait=soon", "wait=-1s"} {
		wantError(t, "GET", base+"/entries?"+q, 400, codeBadRequest)
	}
	if _, err := l.DeleteBefore(context.Background(), offs[5]); err != nil {
		t.Fatal(err)
	}
	start := l.Status().LogStart
	e := wantError(t, "GET", base+"/entries?from=0", 416, codeOutOfRange)
	if e.LogStart == nil || *e.LogStart != start || start == 0 {
		t.Errorf("from below the log start: %+v; want log_start %d", e, start)
	}
	// Without from, a page starts at the log start.
	call(t, "GET", base+"/entries", &p)
	if len(p.Entries) == 0 || p.Entries[0].Offset < start || p.LogStart != start {
		t.Errorf("GET /entries without from: %+v, log start %d", p, start)
	}
}

// A page asked for with wait at the HW comes back once a new entry is
// committed, with it; without a new entry it comes back empty when the
// wait ends, and next stays where it was.
func TestEntriesWait(t *testing.T) {
	l := openLog(t)
	base := serve(t, l, Options{})
	hw := l.Status().ReadableHW

	type result struct {
		p    PageJSON
		code int
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("%s/entries?from=%d&wait=1m", base, hw))
		if err != nil {
			done <- result{code: -1}
			return
		}
		defer resp.Body.Close()
		var r result
		r.code = resp.StatusCode
		_ = json.NewDecoder(resp.Body).Decode(&r.p)
		done <- r
	}()
	off := appendAll(t, l, "news")[0]
	r := <-done
	if r.code != 200 || len(r.p.Entries) != 1 || string(r.p.Entries[0].Data) != "news" || r.p.Entries[0].Offset != off || r.p.Next != off+1 {
		t.Fatalf("waiting at the HW %d: %d %+v; want the entry appended at %d", hw, r.code, r.p, off)
	}

	var p PageJSON
	from := l.Status().ReadableHW
	if code, body := call(t, "GET", fmt.Sprintf("%s/entries?from=%d&wait=20ms", base, from), &p); code != 200 || len(p.Entries) != 0 || p.Next != from {
		t.Errorf("a wait that ended with nothing new: %d %s", code, body)
	}
}

// The handler is read-only unless built with AllowChanges: every change
// route answers 403, and the log is not touched.
func TestReadOnlyByDefault(t *testing.T) {
	l := openLog(t)
	appendAll(t, l, "a", "b", "c")
	base := serve(t, l, Options{})
	before := l.Status()
	for _, path := range []string{"/leader/transfer", "/voters/add?node=n2", "/voters/remove?node=n1", "/delete-before?offset=3"} {
		e := wantError(t, "POST", base+path, 403, codeReadOnly)
		if !strings.Contains(e.Error, "AllowChanges") {
			t.Errorf("POST %s: %q does not say how to allow changes", path, e.Error)
		}
	}
	if after := l.Status(); after.LogStart != before.LogStart || len(after.Voters) != 1 || after.Role != replog.RoleLeader {
		t.Errorf("a read-only handler changed the node: %+v", after)
	}
}

// With AllowChanges the change routes call the Log and map its errors to
// status codes and codes a client can act on; a browser page of another
// origin is refused.
func TestChanges(t *testing.T) {
	l := openLog(t)
	offs := appendAll(t, l, "a", "b", "c", "d")
	base := serve(t, l, Options{AllowChanges: true, ChangeTimeout: 200 * time.Millisecond})

	var idx indexJSON
	if call(t, "GET", base+"/", &idx); !idx.ChangesAllowed || len(idx.Routes) != 10 {
		t.Errorf("GET /: %+v; want all ten routes", idx)
	}
	var d DeleteJSON
	if code, body := call(t, "POST", fmt.Sprintf("%s/delete-before?offset=%d", base, offs[2]), &d); code != 200 || d.Requested != offs[2] || d.LogStart == 0 || d.LogStart > offs[2] {
		t.Errorf("POST /delete-before: %d %s", code, body)
	}
	if got := l.Status().LogStart; got != d.LogStart {
		t.Errorf("log start %d after delete-before answered %d", got, d.LogStart)
	}
	wantError(t, "POST", base+"/delete-before", 400, codeBadRequest)
	wantError(t, "POST", base+"/delete-before?offset=x", 400, codeBadRequest)
	wantError(t, "POST", base+"/voters/add", 400, codeBadRequest)
	wantError(t, "POST", base+"/voters/remove?node=n1", 409, codeLastVoter)
	wantError(t, "POST", base+"/voters/remove?node=ghost", 404, codeUnknownNode)
	wantError(t, "POST", base+"/voters/add?node=ghost", 404, codeUnknownNode) // never fetches: ChangeTimeout ends it
	wantError(t, "POST", base+"/leader/transfer", 409, codeNoSuccessor)
	if vs := l.Status().Voters; len(vs) != 1 || vs[0].ID != "n1" {
		t.Errorf("voters %+v after refused changes", vs)
	}

	// A web page of another origin cannot make the browser change the
	// cluster.
	req, _ := http.NewRequest("POST", fmt.Sprintf("%s/delete-before?offset=%d", base, offs[3]), nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e apiError
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 403 || e.Code != codeCrossOrigin || l.Status().LogStart != d.LogStart {
		t.Errorf("a cross-site POST: %d %+v, log start %d", resp.StatusCode, e, l.Status().LogStart)
	}
}

// The status mapping picks the most specific sentinel of an error that
// wraps several.
func TestErrorStatus(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("waited: %w (%w)", replog.ErrVoterChangeInProgress, context.DeadlineExceeded), 409, codeChangeInProgress},
		{fmt.Errorf("%w: %w", replog.ErrUnknownOutcome, context.DeadlineExceeded), 504, codeUnknownOutcome},
		{fmt.Errorf("%w: %w", replog.ErrNotCaughtUp, context.DeadlineExceeded), 504, codeNotCaughtUp},
		{fmt.Errorf("x: %w", &replog.NotLeaderError{LeaderID: "n2"}), 409, codeNotLeader},
		{&replog.NotLeaderError{}, 503, codeNoLeader},
		{fmt.Errorf("%w: %w", replog.ErrNoLeader, context.Canceled), 503, codeNoLeader},
		{fmt.Errorf("%w and %w", replog.ErrClosed, replog.ErrUnknownOutcome), 504, codeUnknownOutcome},
		{replog.ErrClosed, 503, codeClosed},
		{fmt.Errorf("%w: disk", replog.ErrStorageFailed), 500, codeStorageFailed},
		{context.DeadlineExceeded, 504, codeTimeout},
		{fmt.Errorf("%w: name too long", replog.ErrInvalidArgument), 400, codeBadRequest},
		{errors.New("something else"), 500, codeInternal},
	} {
		status, body := errorStatus(c.err)
		if status != c.status || body.Code != c.code || body.Error != c.err.Error() {
			t.Errorf("%v: %d %+v; want %d %s", c.err, status, body, c.status, c.code)
		}
		if c.code == codeNotLeader && body.Leader != "n2" {
			t.Errorf("%v: leader %q", c.err, body.Leader)
		}
	}
}

func TestOptions(t *testing.T) {
	l := openLog(t)
	for _, o := range []Options{{MaxPageEntries: -1}, {MaxPageBytes: -1}, {MaxWait: -time.Second}, {ChangeTimeout: -time.Second}} {
		if _, err := New(l, o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("New(%+v): %v; want ErrInvalidOptions", o, err)
		}
	}
	if _, err := New(nil, Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("New(nil): %v", err)
	}
	o := Options{}
	h, err := New(l, o)
	if err != nil || o != (Options{}) || h.opts.MaxPageEntries != DefaultMaxPageEntries || h.opts.ChangeTimeout != DefaultChangeTimeout {
		t.Errorf("New with zero options: %v, caller's %+v, handler's %+v", err, o, h.opts)
	}
}

// A three-node cluster: the leader reports its followers' lag, a
// follower refuses /followers naming the leader, and a transfer through
// the handler moves the leadership.
func TestCluster(t *testing.T) {
	c := replogtest.NewCluster(t, 3)
	leader := c.Leader()
	leaderID := leader.Status().NodeID
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	off, err := leader.Append(ctx, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*replog.Log{}
	for _, id := range c.IDs() {
		nodes[id] = c.Node(id)
	}
	urls := map[string]string{}
	for id, l := range nodes {
		urls[id] = serve(t, l, Options{AllowChanges: true})
	}

	var fs FollowersJSON
	deadline := time.Now().Add(30 * time.Second)
	for {
		fs = FollowersJSON{}
		if code, body := call(t, "GET", urls[leaderID]+"/followers", &fs); code != 200 {
			t.Fatalf("GET /followers on the leader: %d %s", code, body)
		}
		caughtUp := len(fs.Followers) == 2
		for _, f := range fs.Followers {
			caughtUp = caughtUp && f.LEO > off && f.Behind == fs.LEO-f.LEO && f.ID != leaderID
		}
		if caughtUp {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the followers did not catch up: %+v", fs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var follower string
	for id := range nodes {
		if id != leaderID {
			follower = id
		}
	}
	e := wantError(t, "GET", urls[follower]+"/followers", 409, codeNotLeader)
	if e.Leader != leaderID || !strings.Contains(e.Error, leaderID) {
		t.Errorf("GET /followers on a follower: %+v; want it to name the leader %s", e, leaderID)
	}
	e = wantError(t, "POST", urls[follower]+"/leader/transfer", 409, codeNotLeader)
	if e.Leader != leaderID {
		t.Errorf("a transfer asked of a follower: %+v", e)
	}

	var tr TransferJSON
	// It returns once another node leads: normally the one named (if it
	// lost its election, whoever won).
	if code, body := call(t, "POST", urls[leaderID]+"/leader/transfer?to="+follower, &tr); code != 200 || tr.LeaderID == leaderID || tr.LeaderID == "" {
		t.Fatalf("POST /leader/transfer?to=%s: %d %s", follower, code, body)
	}
	var vs VotersJSON
	deadline = time.Now().Add(30 * time.Second)
	for vs.LeaderID != tr.LeaderID {
		if time.Now().After(deadline) {
			t.Fatalf("%s's voters %+v after the transfer", follower, vs)
		}
		call(t, "GET", urls[follower]+"/voters", &vs)
		time.Sleep(20 * time.Millisecond)
	}
	if len(vs.Voters) != 3 {
		t.Errorf("voters %+v", vs)
	}
}
