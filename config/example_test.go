package config_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hutchsandbox/hutch/config"
	"github.com/hutchsandbox/hutch/tool"
)

func ExampleNew() {
	ctx := context.Background()
	b, err := config.New(ctx, config.Settings{Tier: "virtual", Mode: "auto"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	ts, err := tool.New(b.Tools)
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := ts.Call(ctx, "write_file", json.RawMessage(`{"path": "a.txt", "content": "x"}`))
	fmt.Println(b.Tools.Gate.Mode(), out.Text, err)
	// Output:
	// auto {"ok":true,"path":"a.txt","bytes":1} <nil>
}
