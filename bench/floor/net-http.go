// The Go floor server of bench/floor.ts: net/http alone, as node-http in servers.ts (reads the
// whole body, answers a small JSON object). Built at bench time when `go` is on the PATH.
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
)

func main() {
	http.HandleFunc("/v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("content-type", "application/json")
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"created":true,"bytes":%d}`, len(body))
	})
	listener, err := net.Listen("tcp", "127.0.0.1:"+os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready")
	if err := http.Serve(listener, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
