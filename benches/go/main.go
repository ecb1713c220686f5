// Command compare is the Go side of compare.sh: it does the work of the
// pki-core rows of issue 8 with Go's standard library and prints the
// median wall time of one run, in seconds.
//
//	go run . issue          issue 1,000 P-256 serving leaves (a new key each)
//	go run . matrix DIR     4-cell rotation trust matrix over 1,000 leaves
//	go run . parse DIR      parse a 1,000-certificate PEM bundle
//	go run . reconcile DIR  no-op reconcile of 10,000 leaves kept as Secret data (PEM)
//	go run . reconcile-parsed DIR   the same on certificates parsed beforehand
//	go run . memory N       issue N leaves and hold them: peak resident MB
//
// DIR holds the certificates written by `compare fixtures DIR` (the pki
// side), so both verify and parse exactly the same DER; the reconcile rows
// read the 10,000 leaves that the root package's `compare fixtures DIR`
// writes.
package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

const leaves = 1000

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// medianOf runs once to warm up, then at least three times and for at
// least one second, and returns the median run time in seconds.
func medianOf(run func() int) float64 {
	run()
	var times []float64
	start := time.Now()
	for len(times) < 3 || time.Since(start) < time.Second {
		t := time.Now()
		run()
		times = append(times, time.Since(t).Seconds())
	}
	sort.Float64s(times)
	return times[len(times)/2]
}

func must[T any](v T, err error) T {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return v
}

func serial() *big.Int {
	b := make([]byte, 16)
	must(rand.Read(b))
	b[0] = (b[0] & 0x7f) | 0x40
	return new(big.Int).SetBytes(b)
}

func keyID(pub *ecdsa.PublicKey) []byte {
	raw := must(pub.Bytes())
	id := sha1.Sum(raw)
	return id[:]
}

// issueOne makes serving leaf i under ca with a new P-256 key, as the pki
// side does: SAN, EKU serverAuth, keyUsage digitalSignature, SKI, AKI.
func issueOne(ca *x509.Certificate, caKey *ecdsa.PrivateKey, i int) ([]byte, *ecdsa.PrivateKey) {
	key := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "svc"},
		NotBefore:             t0.Add(-5 * time.Minute),
		NotAfter:              t0.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"svc" + strconv.Itoa(i) + ".ns.svc"},
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	return must(x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)), key
}

// issue makes n serving leaves under ca, each with a new P-256 key.
func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, n int) int {
	count := 0
	for i := 0; i < n; i++ {
		der, _ := issueOne(ca, caKey, i)
		count += len(der) & 1
		count++
	}
	return count
}

func newCA() (*x509.Certificate, *ecdsa.PrivateKey) {
	key := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "bench-ca"},
		NotBefore:             t0.Add(-5 * time.Minute),
		NotAfter:              t0.Add(790 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          keyID(&key.PublicKey),
	}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key))
	return must(x509.ParseCertificate(der)), key
}

func readCerts(dir, name string) []*x509.Certificate {
	return must(x509.ParseCertificates(pemDER(must(os.ReadFile(filepath.Join(dir, name))))))
}

func pemDER(data []byte) []byte {
	var all []byte
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return all
		}
		all = append(all, block.Bytes...)
	}
}

// rotation holds the DER of every certificate: each run parses it, as the
// pki side does (a pre-flight loads its chains and bundles).
type rotation struct {
	oldRoot, newRoot, bridgeA, bridgeB []byte
	oldLeaves, newLeaves               [][]byte
	at                                 time.Time
}

func ders(certs []*x509.Certificate) [][]byte {
	var out [][]byte
	for _, c := range certs {
		out = append(out, c.Raw)
	}
	return out
}

func load(dir string) rotation {
	secs := must(strconv.ParseInt(strings.TrimSpace(string(must(os.ReadFile(filepath.Join(dir, "at.txt"))))), 10, 64))
	return rotation{
		oldRoot:   readCerts(dir, "old-root.pem")[0].Raw,
		newRoot:   readCerts(dir, "new-root.pem")[0].Raw,
		bridgeA:   readCerts(dir, "bridge-a.pem")[0].Raw,
		bridgeB:   readCerts(dir, "bridge-b.pem")[0].Raw,
		oldLeaves: ders(readCerts(dir, "old-leaves.pem")),
		newLeaves: ders(readCerts(dir, "new-leaves.pem")),
		at:        time.Unix(secs, 0).UTC(),
	}
}

func parseAll(raw [][]byte) []*x509.Certificate {
	var out []*x509.Certificate
	for _, der := range raw {
		out = append(out, must(x509.ParseCertificate(der)))
	}
	return out
}

// matrix verifies every old leaf (served alone) and every new leaf (served
// with bridge B) against the old bundle and the new bundle (new root and
// bridge A), starting from DER.
func matrix(raw rotation) int {
	r := struct {
		oldRoot, newRoot, bridgeA, bridgeB *x509.Certificate
		oldLeaves, newLeaves               []*x509.Certificate
		at                                 time.Time
	}{
		must(x509.ParseCertificate(raw.oldRoot)),
		must(x509.ParseCertificate(raw.newRoot)),
		must(x509.ParseCertificate(raw.bridgeA)),
		must(x509.ParseCertificate(raw.bridgeB)),
		parseAll(raw.oldLeaves),
		parseAll(raw.newLeaves),
		raw.at,
	}
	oldPool := x509.NewCertPool()
	oldPool.AddCert(r.oldRoot)
	newPool := x509.NewCertPool()
	newPool.AddCert(r.newRoot)
	newPool.AddCert(r.bridgeA)
	noChain := x509.NewCertPool()
	bridge := x509.NewCertPool()
	bridge.AddCert(r.bridgeB)
	ok := 0
	for _, roots := range []*x509.CertPool{oldPool, newPool} {
		for _, set := range []struct {
			leaves []*x509.Certificate
			chain  *x509.CertPool
		}{{r.oldLeaves, noChain}, {r.newLeaves, bridge}} {
			for _, leaf := range set.leaves {
				_, err := leaf.Verify(x509.VerifyOptions{
					Roots:         roots,
					Intermediates: set.chain,
					CurrentTime:   r.at,
					KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
				})
				if err == nil {
					ok++
				}
			}
		}
	}
	return ok
}

// parse reads every CERTIFICATE block and keeps one certificate per DER,
// in order, as pki's Bundle::from_pem does.
func parse(data []byte) int {
	seen := map[string]struct{}{}
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			fmt.Fprintln(os.Stderr, "unexpected block", block.Type)
			os.Exit(1)
		}
		c := must(x509.ParseCertificate(block.Bytes))
		if _, dup := seen[string(c.Raw)]; dup {
			continue
		}
		seen[string(c.Raw)] = struct{}{}
		certs = append(certs, c)
	}
	return len(certs)
}

// leaf is what a controller keeps per serving certificate: the names it
// asked for and the Secret data holding the certificate.
type leaf struct {
	dnsNames []string
	tlsCrt   []byte
}

func loadLeaves(dir string) ([]byte, []leaf) {
	ca := readCerts(dir, "ca.pem")[0]
	data := must(os.ReadFile(filepath.Join(dir, "leaves.pem")))
	var out []leaf
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		c := must(x509.ParseCertificate(block.Bytes))
		out = append(out, leaf{dnsNames: c.DNSNames, tlsCrt: pem.EncodeToMemory(block)})
	}
	return ca.SubjectKeyId, out
}

// due says whether a leaf needs re-issuing at now, as pki decides it: 80%
// of its lifetime gone, issued by another CA key, or other names asked for.
func due(c *x509.Certificate, caSKI []byte, names []string, now time.Time) bool {
	refresh := c.NotBefore.Add(c.NotAfter.Sub(c.NotBefore) * 8 / 10)
	if !now.Before(refresh) || !bytes.Equal(c.AuthorityKeyId, caSKI) || len(c.DNSNames) != len(names) {
		return true
	}
	for i := range names {
		if c.DNSNames[i] != names[i] {
			return true
		}
	}
	return false
}

// reconcile decides, for every leaf kept as Secret data, whether anything
// is due: the certificate is parsed from the Secret's tls.crt each time, as
// Go controllers do with the objects their informers cache.
func reconcile(caSKI []byte, leaves []leaf, now time.Time) int {
	n := 0
	for _, l := range leaves {
		block, _ := pem.Decode(l.tlsCrt)
		c := must(x509.ParseCertificate(block.Bytes))
		if due(c, caSKI, l.dnsNames, now) {
			n++
		}
	}
	return n
}

// reconcileParsed is reconcile on certificates parsed beforehand, as pki's
// document holds them.
func reconcileParsed(caSKI []byte, certs []*x509.Certificate, names [][]string, now time.Time) int {
	n := 0
	for i, c := range certs {
		if due(c, caSKI, names[i], now) {
			n++
		}
	}
	return n
}

// peakRSS is the process's peak resident set (VmHWM), in MB.
func peakRSS() float64 {
	for _, line := range strings.Split(string(must(os.ReadFile("/proc/self/status"))), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb := must(strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64))
			return kb / 1024
		}
	}
	fmt.Fprintln(os.Stderr, "no VmHWM in /proc/self/status")
	os.Exit(1)
	return 0
}

// held is an issued leaf as a controller holds it: certificate and key.
type held struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// memory issues n leaves, each with its own key, and keeps them all.
func memory(n int) []held {
	ca, caKey := newCA()
	out := make([]held, 0, n)
	for i := 0; i < n; i++ {
		der, key := issueOne(ca, caKey, i)
		out = append(out, held{must(x509.ParseCertificate(der)), key})
	}
	return out
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: compare issue | matrix DIR | parse DIR")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "issue":
		ca, key := newCA()
		fmt.Printf("%.6f\n", medianOf(func() int { return issue(ca, key, leaves) }))
	case "matrix":
		r := load(os.Args[2])
		if n := matrix(r); n != 4*leaves {
			fmt.Fprintf(os.Stderr, "only %d of %d chains verify\n", n, 4*leaves)
			os.Exit(1)
		}
		fmt.Printf("%.6f\n", medianOf(func() int { return matrix(r) }))
	case "parse":
		data := must(os.ReadFile(filepath.Join(os.Args[2], "old-leaves.pem")))
		if n := parse(bytes.Clone(data)); n != leaves {
			fmt.Fprintf(os.Stderr, "parsed %d of %d certificates\n", n, leaves)
			os.Exit(1)
		}
		fmt.Printf("%.6f\n", medianOf(func() int { return parse(data) }))
	case "reconcile", "reconcile-parsed":
		caSKI, leaves := loadLeaves(os.Args[2])
		// A month after issuance: nothing is due.
		now := t0.Add(30 * 24 * time.Hour)
		if n := reconcile(caSKI, leaves, now); n != 0 || len(leaves) != 10000 {
			fmt.Fprintf(os.Stderr, "%d of %d leaves due\n", n, len(leaves))
			os.Exit(1)
		}
		if os.Args[1] == "reconcile" {
			fmt.Printf("%.6f\n", medianOf(func() int { return reconcile(caSKI, leaves, now) }))
			break
		}
		var certs []*x509.Certificate
		var names [][]string
		for _, l := range leaves {
			block, _ := pem.Decode(l.tlsCrt)
			certs = append(certs, must(x509.ParseCertificate(block.Bytes)))
			names = append(names, l.dnsNames)
		}
		fmt.Printf("%.6f\n", medianOf(func() int { return reconcileParsed(caSKI, certs, names, now) }))
	case "memory":
		all := memory(int(must(strconv.ParseInt(os.Args[2], 10, 64))))
		fmt.Printf("%.1f\n", peakRSS())
		runtime.KeepAlive(all)
	default:
		fmt.Fprintln(os.Stderr, "unknown row", os.Args[1])
		os.Exit(2)
	}
}
