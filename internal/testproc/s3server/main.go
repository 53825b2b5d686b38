// Command s3server is the S3-compatible server sluice's tests and chaos
// runs store remote segments in: gofakes3 (github.com/johannesboyne/gofakes3)
// with its in-memory backend, behind a check of the request's access key.
// Tests start it through testproc.StartS3; it is not part of the product.
//
//	s3server -addr 127.0.0.1:9000 -bucket tiered -access-key K -secret-key S
//
// It prints "s3server listening on http://ADDR" once it serves. Objects
// live in memory (a Put is stored whole or not at all) and are lost when
// the process exits. With -access-key, a request signed with another
// access key is refused with 403 InvalidAccessKeyId; the signature itself
// is not verified, so a wrong secret key is not caught.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	buckets := flag.String("bucket", "", "comma-separated buckets to create at start")
	accessKey := flag.String("access-key", "", "the accepted access key id (empty: any)")
	flag.String("secret-key", "", "the secret key (accepted for symmetry; signatures are not verified)")
	flag.Parse()

	backend := s3mem.New()
	for _, b := range strings.Split(*buckets, ",") {
		if b = strings.TrimSpace(b); b != "" {
			if err := backend.CreateBucket(b); err != nil {
				log.Fatalf("s3server: create bucket %s: %v", b, err)
			}
		}
	}
	faker := gofakes3.New(backend, gofakes3.WithAutoBucket(false), gofakes3.WithoutVersioning())
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("s3server: %v", err)
	}
	fmt.Fprintf(os.Stdout, "s3server listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: checkAccessKey(*accessKey, faker.Server())}
	log.Fatal(srv.Serve(ln))
}

// credential is the access key in a SigV4 Authorization header
// ("AWS4-HMAC-SHA256 Credential=AKID/date/region/s3/aws4_request, ...")
// or a presigned URL's X-Amz-Credential.
var credential = regexp.MustCompile(`Credential=([^/,\s]+)/`)

// checkAccessKey refuses requests whose access key is not key (S3's 403
// InvalidAccessKeyId); an empty key accepts every request.
func checkAccessKey(key string, next http.Handler) http.Handler {
	if key == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := ""
		if m := credential.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
			got = m[1]
		} else if c := r.URL.Query().Get("X-Amz-Credential"); c != "" {
			got, _, _ = strings.Cut(c, "/")
		}
		if got != key {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided does not exist in our records.</Message><Resource>%s</Resource></Error>`, r.URL.Path)
			return
		}
		next.ServeHTTP(w, r)
	})
}
