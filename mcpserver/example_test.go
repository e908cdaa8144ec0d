package mcpserver_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/mcpserver"
)

func Example() {
	ctx := context.Background()
	// Package config builds what the server serves; the server serves it.
	b, err := config.New(ctx, config.Settings{Tier: "virtual", Mode: "auto", Asker: mcpserver.Asker})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	srv, _ := mcpserver.New(mcpserver.Config{Tools: b.Tools, StorePath: b.StorePath})

	// Any MCP client works; here the SDK's client over an in-memory pipe.
	st, ct := mcp.NewInMemoryTransports()
	_, _ = srv.Connect(ctx, st, nil)
	cs, _ := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	defer cs.Close()

	res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "a.txt", "content": "x"}})
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// false {"ok":true,"path":"a.txt","bytes":1}
}
