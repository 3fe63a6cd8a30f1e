"""The `/v1` HTTP + websocket server: routes, the run manager, the durable run store, assets."""
