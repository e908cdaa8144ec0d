package boundary

import "strconv"

// ProxyPort is where, inside a sandbox whose network is an allow-list, the
// init listens on loopback (127.0.0.1 and ::1) for the filtering proxy.
const ProxyPort = 3128

// NetFD is the init's descriptor for the network bridge: every connection
// a command opens to the proxy port travels to the host over it, as a
// descriptor.
const NetFD = 4

// ProxyEnv are the variables that point programs at the proxy, in the
// spellings curl, wget, Python, Go, Node and the rest read: http and https
// through HTTP (CONNECT for https), everything else through SOCKS5 with
// names resolved by the proxy. They are directions, not the wall: the
// sandbox's network namespace has no other way out.
func ProxyEnv() map[string]string {
	httpProxy := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	socks := "socks5h://127.0.0.1:" + strconv.Itoa(ProxyPort)
	return map[string]string{
		"http_proxy": httpProxy, "HTTP_PROXY": httpProxy,
		"https_proxy": httpProxy, "HTTPS_PROXY": httpProxy,
		"all_proxy": socks, "ALL_PROXY": socks,
	}
}
