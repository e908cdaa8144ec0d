package mcpserver_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/mcpserver"
)

func Example() {
	ctx := context.Background()
	cfg, closeAll, err := mcpserver.Open(ctx, mcpserver.Settings{Tier: "virtual", Mode: "auto"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeAll()
	srv, _ := mcpserver.New(cfg)

	// Any MCP client works; here the SDK's client over an in-memory pipe.
	st, ct := mcp.NewInMemoryTransports()
	_, _ = srv.Connect(ctx, st, nil)
	cs, _ := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	defer cs.Close()

	res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "a.txt", "content": "x"}})
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// false {"bytes":1,"ok":true,"path":"a.txt"}
}
