package netproxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"

	"github.com/hutchsandbox/hutch/netproxy"
)

func ExampleNewList() {
	l, err := netproxy.NewList(
		[]string{"example.com", "*.example.com:443", "10.0.0.0/8"},
		[]string{"ads.example.com"},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(l)
	fmt.Println(l.Allows("EXAMPLE.com.", 80))     // the name exactly, any port
	fmt.Println(l.Allows("api.example.com", 443)) // a subdomain on 443
	fmt.Println(l.Allows("api.example.com", 80))  // not on 80
	fmt.Println(l.Allows("ads.example.com", 443)) // denied
	fmt.Println(l.Allows("10.1.2.3", 22))         // an IP literal in the range
	// A name may resolve to 10.9.9.9 on any port: a range names it.
	fmt.Println(l.NamesAddr(netip.MustParseAddr("10.9.9.9"), 5432))
	fmt.Println(l.Check("example.org", 443))

	_, err = netproxy.NewList([]string{"*.co.uk"}, nil)
	fmt.Println(err)
	// Output:
	// allow example.com, *.example.com:443, 10.0.0.0/8; deny ads.example.com
	// true
	// true
	// false
	// false
	// true
	// true
	// example.org:443 is not in the network allow-list
	// allow-list: bad network entry "*.co.uk": *.co.uk covers a whole public suffix (anyone can register under it); list the domains you need, as in *.example.co.uk
}

func ExampleProxy() {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the origin")
	}))
	defer origin.Close()

	// Allow the origin's address only (a loopback address must be listed).
	list, err := netproxy.NewList([]string{"127.0.0.1"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := netproxy.New(list, netproxy.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go p.Serve(context.Background(), ln)

	client := &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: ln.Addr().String()}),
	}}
	for _, u := range []string{origin.URL, "http://blocked.example/"} {
		resp, err := client.Get(u)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s\n", resp.StatusCode, body)
	}
	fmt.Println(p.Blocked())
	// Output:
	// 200 hello from the origin
	// 403 blocked.example:80 is not in the network allow-list
	//
	// [blocked.example:80]
}
