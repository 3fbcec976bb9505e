package main

import (
	"embed"
	"io/fs"
	"net/http"
)

// staticFiles holds the dashboard: plain HTML, CSS and JavaScript, no build
// step and nothing loaded from elsewhere.
//
//go:embed static
var staticFiles embed.FS

// staticHandler serves /static/*.
func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}

// serveIndex serves the dashboard page at /.
func serveIndex(w http.ResponseWriter, r *http.Request) {
	page, err := staticFiles.ReadFile("static/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(page)
}
