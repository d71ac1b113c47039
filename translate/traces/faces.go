package traces

import "go.opentelemetry.io/otel/attribute"

// Face is the face of the gateway a request came through, when not MCP's
// own endpoint: saga, multi_turn_sse or rest (mcp_gateway.face). A face's
// request is named after the tool call it serves (gen_ai.tool.name), and
// each modern request the face makes for it is a span of its own under
// it; the later requests of the call (a resumeSaga, a turn's answers, a
// REST poll or advance) link to the span of its first (FirstRound).
const Face = attribute.Key("mcp_gateway.face")
