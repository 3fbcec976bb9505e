package replogadmin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/replog-io/replog"
	"github.com/replog-io/replog/replogadmin"
)

// A service mounts the admin handler under /admin/ on its own server. The
// handler authenticates nobody: bind that server to localhost, or put
// the route behind the service's own authentication and TLS.
func Example() {
	dir, err := os.MkdirTemp("", "replogadmin-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := replog.Open(replog.Options{NodeID: "n1", Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append(context.Background(), []byte("hello")); err != nil {
		log.Fatal(err)
	}

	admin, err := replogadmin.New(l, replogadmin.Options{}) // read-only
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", admin))
	srv := httptest.NewServer(mux) // a real service: an http.Server on 127.0.0.1
	defer srv.Close()

	var st replog.Status
	get(srv.URL+"/admin/status", &st)
	fmt.Println("role:", st.Role)

	var page replogadmin.PageJSON
	get(srv.URL+"/admin/entries?from=0", &page)
	for _, e := range page.Entries {
		fmt.Printf("entry %d: %s\n", e.Offset, e.Data)
	}

	resp, err := http.Post(srv.URL+"/admin/delete-before?offset=1", "", nil)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("delete-before on a read-only handler:", resp.Status)
	// Output:
	// role: leader
	// entry 1: hello
	// delete-before on a read-only handler: 403 Forbidden
}

func get(url string, v any) {
	resp, err := http.Get(url)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		log.Fatal(err)
	}
}
