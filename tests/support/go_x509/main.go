// Verifies a TLS server chain against a CA bundle with Go's crypto/x509,
// at a given time: an implementation independent of pki's and OpenSSL's.
//
// Usage: go_x509 BUNDLE CHAIN DNSNAME UNIX_SECONDS
//
// CHAIN holds the leaf first, then untrusted intermediates (bridge B).
// Exit 0 when the chain verifies; 1 with Go's reason on stdout when it
// does not; 2 on bad input.
package main

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strconv"
	"time"
)

func certs(path string) []*x509.Certificate {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
			os.Exit(2)
		}
		out = append(out, c)
	}
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: go_x509 BUNDLE CHAIN DNSNAME UNIX_SECONDS")
		os.Exit(2)
	}
	at, err := strconv.ParseInt(os.Args[4], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	roots := x509.NewCertPool()
	for _, c := range certs(os.Args[1]) {
		roots.AddCert(c)
	}
	chain := certs(os.Args[2])
	if len(chain) == 0 {
		fmt.Fprintln(os.Stderr, "empty chain")
		os.Exit(2)
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	_, err = chain[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		DNSName:       os.Args[3],
		CurrentTime:   time.Unix(at, 0),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}
