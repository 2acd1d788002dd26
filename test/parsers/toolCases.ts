/**
 * Tool-call parser cases as data. Most reproduce SGLang's own tests (test/srt/test_function_call_parser.py and
 * test/registered/unit/function_call/test_*_detector.py; `source` names the SGLang test); the rest cover rules of this
 * project (dropped unknown tools, malformed calls, text after calls). Where our documented whitespace rule differs
 * from SGLang's expectation, `note` says so.
 */
import type * as Canonical from "../../src/protocol/Canonical.ts"

const tool = (name: string, properties: Canonical.JsonObject = {}): Canonical.Tool => ({
  type: "function",
  function: { name, parameters: { type: "object", properties } }
})

export const tools = {
  weather: [
    tool("get_weather", { city: { type: "string" }, unit: { type: "string" } }),
    tool("search", { query: { type: "string" } })
  ],
  tourist: [
    tool("get_weather", { city: { type: "string" } }),
    tool("get_tourist_attractions", { city: { type: "string" } })
  ],
  location: [
    tool("get_weather", { location: { type: "string" }, unit: { type: "string" } }),
    tool("search", { query: { type: "string" } })
  ],
  decision: [tool("make_next_step_decision", { decision: { type: "string" }, content: { type: "string" } })],
  coder: [
    tool("get_current_weather", { city: { type: "string" }, state: { type: "string" }, unit: { type: "string" } }),
    tool("calculate_area", {
      shape: { type: "string" },
      dimensions: { type: "object" },
      precision: { type: "integer" }
    })
  ],
  types: [
    tool("test_types", {
      int_param: { type: "integer" },
      float_param: { type: "float" },
      bool_param: { type: "boolean" },
      str_param: { type: "string" },
      obj_param: { type: "object" }
    })
  ],
  glm: [tool("get_weather", { city: { type: "string" }, date: { type: "string" } })],
  todo: [tool("todo_write", { todos: { type: "array" } })],
  gptoss: [
    tool("search", { query: { type: "string" }, topn: { type: "integer" } }),
    tool("get_weather", { city: { type: "string" } })
  ]
} as const

export interface ExpectedCall {
  readonly name: string
  /** Arguments compared as parsed JSON. */
  readonly args: unknown
  /** The exact arguments text, where the format keeps the model's JSON text. */
  readonly text?: string
}

export interface ToolCase {
  readonly parser: string
  readonly spec: string
  readonly source?: string
  readonly note?: string
  readonly text: string
  readonly tools: ReadonlyArray<Canonical.Tool>
  readonly normalText: string
  readonly calls: ReadonlyArray<ExpectedCall>
  readonly dropped?: number
  readonly malformed?: number
}

const todos = [
  { id: "1", task: "Check for hard-coded issues in the backend code", status: "in_progress" },
  { id: "2", task: "Check for hard-coded issues in the frontend code", status: "pending" },
  { id: "3", task: "Check for code violating the Single Responsibility Principle", status: "pending" },
  { id: "4", task: "Generate a rectification proposal report", status: "pending" }
]
const todoJson = JSON.stringify(todos).replaceAll("\":", "\": ").replaceAll(",\"", ", \"").replaceAll("},{", "}, {")

export const toolCases: ReadonlyArray<ToolCase> = [
  // ---- qwen25 (test_qwen25_detector.py)
  {
    parser: "qwen25",
    spec: "parses a single call and keeps the arguments' exact text",
    source: "test_single_tool_call",
    text: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Beijing\"}}\n</tool_call>",
    tools: tools.weather,
    normalText: "",
    calls: [{ name: "get_weather", args: { city: "Beijing" }, text: "{\"city\": \"Beijing\"}" }]
  },
  {
    parser: "qwen25",
    spec: "parses multiple calls separated by a newline",
    source: "test_multiple_tool_calls",
    text: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Beijing\"}}\n</tool_call>\n" +
      "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"restaurants\"}}\n</tool_call>",
    tools: tools.weather,
    normalText: "",
    calls: [{ name: "get_weather", args: { city: "Beijing" } }, { name: "search", args: { query: "restaurants" } }]
  },
  {
    parser: "qwen25",
    spec: "keeps the text before the call, without the newline that joins it to the call",
    source: "test_tool_call_with_preceding_text",
    text:
      "Let me check the weather.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Shanghai\"}}\n</tool_call>",
    tools: tools.weather,
    normalText: "Let me check the weather.",
    calls: [{ name: "get_weather", args: { city: "Shanghai" } }]
  },
  {
    parser: "qwen25",
    spec: "returns text without calls unchanged",
    source: "test_no_tool_call",
    text: "Hello, how can I help you today?",
    tools: tools.weather,
    normalText: "Hello, how can I help you today?",
    calls: []
  },
  {
    parser: "qwen25",
    spec: "keeps a malformed call's raw text as content and counts it",
    source: "test_malformed_json",
    note: "SGLang only asserts no call; we also keep the text and count the failure",
    text: "<tool_call>\n{invalid json}\n</tool_call>",
    tools: tools.weather,
    normalText: "<tool_call>\n{invalid json}\n</tool_call>",
    calls: [],
    malformed: 1
  },
  {
    parser: "qwen25",
    spec: "accepts extra whitespace around the JSON",
    source: "test_tool_call_with_extra_whitespace",
    text: "<tool_call>\n  {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Tokyo\"}}  \n</tool_call>",
    tools: tools.weather,
    normalText: "",
    calls: [{ name: "get_weather", args: { city: "Tokyo" } }]
  },
  {
    parser: "qwen25",
    spec: "drops and counts a call to a tool the request did not define",
    source: "test_unknown_tool_name.py",
    text: "Checking.\n<tool_call>\n{\"name\": \"unknown_tool\", \"arguments\": {\"x\": 1}}\n</tool_call>\n" +
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    tools: tools.weather,
    normalText: "Checking.",
    calls: [{ name: "get_weather", args: { city: "Paris" } }],
    dropped: 1
  },
  {
    parser: "qwen25",
    spec: "keeps text after the calls, joined by the whitespace that followed the call",
    note: "SGLang drops text after the calls",
    text: "Before.\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"q\"}}\n</tool_call>\n\nAfter.",
    tools: tools.weather,
    normalText: "Before.\n\nAfter.",
    calls: [{ name: "search", args: { query: "q" } }]
  },
  {
    parser: "qwen25",
    spec: "accepts `parameters` for `arguments`, a missing arguments key, and double-encoded arguments",
    text: "<tool_call>{\"name\": \"search\", \"parameters\": {\"query\": \"a\"}}</tool_call>" +
      "<tool_call>{\"name\": \"search\"}</tool_call>" +
      "<tool_call>{\"name\": \"search\", \"arguments\": \"{\\\"query\\\": \\\"b\\\"}\"}</tool_call>",
    tools: tools.weather,
    normalText: "",
    calls: [
      { name: "search", args: { query: "a" }, text: "{\"query\": \"a\"}" },
      { name: "search", args: {}, text: "{}" },
      { name: "search", args: { query: "b" }, text: "{\"query\": \"b\"}" }
    ]
  },
  {
    parser: "qwen25",
    spec: "counts arguments that are not a JSON object (or repeat a key) as malformed",
    text: "<tool_call>\n{\"name\": \"search\", \"arguments\": [1]}\n</tool_call>\n" +
      "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"a\", \"query\": \"b\"}}\n</tool_call>",
    tools: tools.weather,
    normalText: "<tool_call>\n{\"name\": \"search\", \"arguments\": [1]}\n</tool_call>\n" +
      "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"a\", \"query\": \"b\"}}\n</tool_call>",
    calls: [],
    malformed: 2
  },
  {
    parser: "qwen25",
    spec: "tries an unterminated call (the model stopped after it); a truncated one is malformed",
    text:
      "A\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"a\"}}\n<tool_call>\n{\"name\": \"search\", \"argu",
    tools: tools.weather,
    normalText:
      "A\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"a\"}}\n<tool_call>\n{\"name\": \"search\", \"argu",
    calls: [],
    malformed: 1
  },
  {
    parser: "hermes",
    spec: "reads Hermes blocks without newlines",
    source: "test_hermes_detector.py",
    text: "Sure. <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}</tool_call>",
    tools: tools.weather,
    normalText: "Sure.",
    calls: [{ name: "get_weather", args: { city: "Rome" } }]
  },
  // ---- qwen3_coder (TestQwen3CoderDetector)
  {
    parser: "qwen3_coder",
    spec: "parses a single XML call",
    source: "test_detect_and_parse_single_tool",
    text:
      "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n</parameter>\n" +
      "<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>",
    tools: tools.coder,
    normalText: "",
    calls: [{ name: "get_current_weather", args: { city: "Dallas", state: "TX", unit: "fahrenheit" } }]
  },
  {
    parser: "qwen3_coder",
    spec: "keeps the text before the call",
    source: "test_detect_and_parse_with_content",
    text:
      "Sure! Let me check the weather for you.<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n" +
      "</parameter>\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>",
    tools: tools.coder,
    normalText: "Sure! Let me check the weather for you.",
    calls: [{ name: "get_current_weather", args: { city: "Dallas", state: "TX", unit: "fahrenheit" } }]
  },
  {
    parser: "qwen3_coder",
    spec: "types multiline values by the schema",
    source: "test_detect_and_parse_multiline_param",
    text:
      "<tool_call>\n<function=calculate_area>\n<parameter=shape>\nrectangle\n</parameter>\n<parameter=dimensions>\n" +
      "{\"width\": 10,\n \"height\": 20}\n</parameter>\n<parameter=precision>\n2\n</parameter>\n</function>\n</tool_call>",
    tools: tools.coder,
    normalText: "",
    calls: [{
      name: "calculate_area",
      args: { shape: "rectangle", dimensions: { width: 10, height: 20 }, precision: 2 }
    }]
  },
  {
    parser: "qwen3_coder",
    spec: "parses parallel calls",
    source: "test_detect_and_parse_parallel_tools",
    note: "SGLang expects normal_text \"\\n\" (the separator); whitespace between calls belongs to the calls here",
    text:
      "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n" +
      "</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n" +
      "<function=get_current_weather>\n<parameter=city>\nOrlando\n</parameter>\n<parameter=state>\nFL\n</parameter>\n" +
      "<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>",
    tools: tools.coder,
    normalText: "",
    calls: [
      { name: "get_current_weather", args: { city: "Dallas", state: "TX", unit: "fahrenheit" } },
      { name: "get_current_weather", args: { city: "Orlando", state: "FL", unit: "fahrenheit" } }
    ]
  },
  {
    parser: "qwen3_coder",
    spec: "reads a call without parameters as empty arguments",
    source: "test_edge_case_no_parameters",
    text: "<tool_call>\n<function=get_current_weather>\n</function>\n</tool_call>",
    tools: tools.coder,
    normalText: "",
    calls: [{ name: "get_current_weather", args: {} }]
  },
  {
    parser: "qwen3_coder",
    spec: "keeps special characters in values",
    source: "test_edge_case_special_chars_in_value",
    text:
      "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas->TX\n</parameter>\n</function>\n</tool_call>",
    tools: tools.coder,
    normalText: "",
    calls: [{ name: "get_current_weather", args: { city: "Dallas->TX" } }]
  },
  {
    parser: "qwen3_coder",
    spec: "converts values by parameter type",
    source: "test_extract_tool_calls_type_conversion",
    text:
      "<tool_call>\n<function=test_types>\n<parameter=int_param>\n42\n</parameter>\n<parameter=float_param>\n3.14\n" +
      "</parameter>\n<parameter=bool_param>\ntrue\n</parameter>\n<parameter=str_param>\nhello world\n</parameter>\n" +
      "<parameter=obj_param>\n{\"key\": \"value\"}\n</parameter>\n</function>\n</tool_call>",
    tools: tools.types,
    normalText: "",
    calls: [{
      name: "test_types",
      args: {
        int_param: 42,
        float_param: 3.14,
        bool_param: true,
        str_param: "hello world",
        obj_param: { key: "value" }
      }
    }]
  },
  {
    parser: "qwen3_coder",
    spec: "keeps the text between calls",
    source: "test_parse_streaming_multiple_tools",
    text:
      "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n" +
      "</parameter>\n</function>\n</tool_call>\nSome text in between.\n<tool_call>\n<function=calculate_area>\n" +
      "<parameter=shape>\ncircle\n</parameter>\n<parameter=dimensions>\n{\"radius\": 5}\n</parameter>\n</function>\n</tool_call>",
    tools: tools.coder,
    normalText: "Some text in between.",
    calls: [
      { name: "get_current_weather", args: { city: "Dallas", state: "TX" } },
      { name: "calculate_area", args: { shape: "circle", dimensions: { radius: 5 } } }
    ]
  },
  // ---- llama3 (TestLlama32Detector)
  {
    parser: "llama3",
    spec: "parses a bare JSON call",
    source: "test_single_json",
    text: "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
    tools: tools.tourist,
    normalText: "",
    calls: [{ name: "get_weather", args: { city: "Paris" }, text: "{\"city\": \"Paris\"}" }]
  },
  {
    parser: "llama3",
    spec: "parses `;`-separated calls after the python tag",
    source: "test_multiple_json_with_separator",
    text: "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}};" +
      "{\"name\": \"get_tourist_attractions\", \"parameters\": {\"city\": \"Paris\"}}",
    tools: tools.tourist,
    normalText: "",
    calls: [{ name: "get_weather", args: { city: "Paris" } }, {
      name: "get_tourist_attractions",
      args: { city: "Paris" }
    }]
  },
  {
    parser: "llama3",
    spec: "parses calls each behind its own python tag",
    source: "test_multiple_json_with_separator_customized",
    text:
      "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {}}<|python_tag|>{\"name\": \"get_tourist_attractions\", \"parameters\": {}}",
    tools: tools.tourist,
    normalText: "",
    calls: [{ name: "get_weather", args: {} }, { name: "get_tourist_attractions", args: {} }]
  },
  {
    parser: "llama3",
    spec: "keeps trailing text after the JSON",
    source: "test_json_with_trailing_text",
    text: "{\"name\": \"get_weather\", \"parameters\": {}} Some follow-up text",
    tools: tools.tourist,
    normalText: "Some follow-up text",
    calls: [{ name: "get_weather", args: {} }]
  },
  {
    parser: "llama3",
    spec: "skips invalid JSON up to the next object, counting it as malformed",
    source: "test_invalid_then_valid_json",
    text: "{\"name\": \"get_weather\", \"parameters\": {{\"name\": \"get_weather\", \"parameters\": {}}",
    tools: tools.tourist,
    normalText: "{\"name\": \"get_weather\", \"parameters\": {",
    calls: [{ name: "get_weather", args: {} }],
    malformed: 1
  },
  {
    parser: "llama3",
    spec: "returns plain text unchanged",
    source: "test_plain_text_only",
    text: "This is just plain explanation text.",
    tools: tools.tourist,
    normalText: "This is just plain explanation text.",
    calls: []
  },
  {
    parser: "llama3",
    spec: "keeps the text before the python tag",
    source: "test_with_python_tag_prefix",
    text: "Some intro. <|python_tag|>{\"name\": \"get_weather\", \"parameters\": {}}",
    tools: tools.tourist,
    normalText: "Some intro.",
    calls: [{ name: "get_weather", args: {} }]
  },
  // ---- mistral (TestMistralDetector)
  {
    parser: "mistral",
    spec: "keeps nested brackets inside JSON strings",
    source: "test_detect_and_parse_with_nested_brackets_in_content",
    text:
      "[TOOL_CALLS] [{\"name\":\"make_next_step_decision\", \"arguments\":{\"decision\":\"\",\"content\":\"```\\nTOOL: Access a weather API or service\\nOBSERVATION: Retrieve the current weather data for the top 5 populated cities in the US\\nANSWER: The weather in the top 5 populated cities in the US is as follows: [City Name] - [Weather Conditions] - [Temperature]\\n```\"}}]",
    tools: tools.decision,
    normalText: "",
    calls: [{
      name: "make_next_step_decision",
      args: {
        decision: "",
        content:
          "```\nTOOL: Access a weather API or service\nOBSERVATION: Retrieve the current weather data for the top 5 populated cities in the US\nANSWER: The weather in the top 5 populated cities in the US is as follows: [City Name] - [Weather Conditions] - [Temperature]\n```"
      }
    }]
  },
  {
    parser: "mistral",
    spec: "parses a simple call",
    source: "test_detect_and_parse_simple_case",
    text:
      "[TOOL_CALLS] [{\"name\":\"make_next_step_decision\", \"arguments\":{\"decision\":\"TOOL\", \"content\":\"Use weather API\"}}]",
    tools: tools.decision,
    normalText: "",
    calls: [{
      name: "make_next_step_decision",
      args: { decision: "TOOL", content: "Use weather API" },
      text: "{\"decision\":\"TOOL\", \"content\":\"Use weather API\"}"
    }]
  },
  {
    parser: "mistral",
    spec: "returns text without calls unchanged",
    source: "test_detect_and_parse_no_tool_calls",
    text: "This is just normal text without any tool calls.",
    tools: tools.decision,
    normalText: "This is just normal text without any tool calls.",
    calls: []
  },
  {
    parser: "mistral",
    spec: "keeps the text before [TOOL_CALLS], stripped",
    source: "test_detect_and_parse_with_text_before_tool_call",
    text:
      "Here is some text before the tool call: [TOOL_CALLS] [{\"name\":\"make_next_step_decision\", \"arguments\":{\"decision\":\"ANSWER\", \"content\":\"The answer is 42\"}}]",
    tools: tools.decision,
    normalText: "Here is some text before the tool call:",
    calls: [{ name: "make_next_step_decision", args: { decision: "ANSWER", content: "The answer is 42" } }]
  },
  {
    parser: "mistral",
    spec: "reads the NAME[ARGS]{json} variant",
    text: "[TOOL_CALLS]make_next_step_decision[ARGS]{\"decision\": \"A\", \"content\": \"B\"}",
    tools: tools.decision,
    normalText: "",
    calls: [{
      name: "make_next_step_decision",
      args: { decision: "A", content: "B" },
      text: "{\"decision\": \"A\", \"content\": \"B\"}"
    }]
  },
  {
    parser: "mistral",
    spec: "counts a call array that can never be valid JSON as malformed",
    text: "Hi [TOOL_CALLS] [{\"name\": oops}]",
    tools: tools.decision,
    normalText: "Hi [TOOL_CALLS] [{\"name\": oops}]",
    calls: [],
    malformed: 1
  },
  // ---- kimi_k2 (TestKimiK2Detector)
  {
    parser: "kimi_k2",
    spec: "parses a single call and passes the arguments through",
    source: "test_single_tool_call",
    text:
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
    tools: tools.tourist,
    normalText: "",
    calls: [{ name: "get_weather", args: { city: "Paris" }, text: "{\"city\": \"Paris\"}" }]
  },
  {
    parser: "kimi_k2",
    spec: "parses multiple calls in one section",
    source: "test_multiple_tool_calls",
    text:
      "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions.get_tourist_attractions:1<|tool_call_argument_begin|>{\"city\": \"London\"}<|tool_call_end|><|tool_calls_section_end|>",
    tools: tools.tourist,
    normalText: "",
    calls: [
      { name: "get_weather", args: { city: "Paris" }, text: "{\"city\": \"Paris\"}" },
      { name: "get_tourist_attractions", args: { city: "London" }, text: "{\"city\": \"London\"}" }
    ]
  },
  {
    parser: "kimi_k2",
    spec: "leaves text without a section marker unchanged",
    source: "test_invalid_tool_call",
    text: "invalid_tool:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
    tools: tools.tourist,
    normalText:
      "invalid_tool:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
    calls: []
  },
  // ---- deepseekv3 (TestDeepSeekV3Detector)
  {
    parser: "deepseekv3",
    spec: "parses fenced JSON calls in a section",
    source: "test_parse_streaming_multiple_tool_calls_with_multi_token_chunk",
    text:
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\":\"Shanghai\"}\n```<｜tool▁call▁end｜>\n" +
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_tourist_attractions\n```json\n{\"city\": \"Beijing\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    tools: tools.tourist,
    normalText: "",
    calls: [
      { name: "get_weather", args: { city: "Shanghai" }, text: "{\"city\":\"Shanghai\"}" },
      { name: "get_tourist_attractions", args: { city: "Beijing" }, text: "{\"city\": \"Beijing\"}" }
    ]
  },
  {
    parser: "deepseekv3",
    spec: "keeps the text before the section and counts a malformed call",
    text:
      "Let me look.\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": }\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    tools: tools.tourist,
    normalText:
      "Let me look.\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": }\n```<｜tool▁call▁end｜>",
    calls: [],
    malformed: 1
  },
  // ---- deepseekv31 (test_deepseekv31_detector.py)
  {
    parser: "deepseekv31",
    spec: "emits the text before the call once, with or without the section marker",
    source: "test_text_before_tool_call_is_emitted_once",
    text:
      "Let me check the weather.\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Tokyo\"}<｜tool▁call▁end｜>",
    tools: tools.tourist,
    normalText: "Let me check the weather.",
    calls: [{ name: "get_weather", args: { city: "Tokyo" }, text: "{\"city\": \"Tokyo\"}" }]
  },
  {
    parser: "deepseekv31",
    spec: "accepts a bare call without the section marker",
    source: "test_text_before_tool_call_is_emitted_once",
    text:
      "Let me check the weather.\n<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Tokyo\"}<｜tool▁call▁end｜>",
    tools: tools.tourist,
    normalText: "Let me check the weather.",
    calls: [{ name: "get_weather", args: { city: "Tokyo" } }]
  },
  {
    parser: "deepseekv31",
    spec: "does not repeat the prefix while arguments arrive",
    source: "test_prefix_is_not_repeated_while_arguments_arrive",
    text:
      "Checking... <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Tokyo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    tools: tools.tourist,
    normalText: "Checking...",
    calls: [{ name: "get_weather", args: { city: "Tokyo" } }]
  },
  // ---- glm45 (TestGlm4MoeDetector)
  {
    parser: "glm45",
    spec: "parses a single call",
    source: "test_single_tool_call",
    text:
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n<arg_key>date</arg_key>\n<arg_value>2024-06-27</arg_value>\n</tool_call>",
    tools: tools.glm,
    normalText: "",
    calls: [{ name: "get_weather", args: { city: "Beijing", date: "2024-06-27" } }]
  },
  {
    parser: "glm45",
    spec: "parses multiple calls",
    source: "test_multiple_tool_calls",
    text:
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n<arg_key>date</arg_key>\n<arg_value>2024-06-27</arg_value>\n</tool_call>" +
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Shanghai</arg_value>\n<arg_key>date</arg_key>\n<arg_value>2024-06-28</arg_value>\n</tool_call>",
    tools: tools.glm,
    normalText: "",
    calls: [
      { name: "get_weather", args: { city: "Beijing", date: "2024-06-27" } },
      { name: "get_weather", args: { city: "Shanghai", date: "2024-06-28" } }
    ]
  },
  {
    parser: "glm45",
    spec: "drops a call to an unknown function",
    source: "test_invalid_tool_call",
    text: "<tool_call>invalid_func\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n</tool_call>",
    tools: tools.glm,
    normalText: "",
    calls: [],
    dropped: 1
  },
  {
    parser: "glm45",
    spec: "reads array arguments written as JSON",
    source: "test_array_argument_with_escaped_json",
    text: `<tool_call>todo_write\n<arg_key>todos</arg_key>\n<arg_value>${todoJson}</arg_value>\n</tool_call>`,
    tools: tools.todo,
    normalText: "",
    calls: [{ name: "todo_write", args: { todos } }]
  },
  {
    parser: "glm45",
    spec: "reads array arguments with escaped quotes and literal \\n separators",
    source: "test_array_argument_with_escaped_json",
    text: `<tool_call>todo_write\\n<arg_key>todos</arg_key>\\n<arg_value>${
      todoJson.replaceAll("\"", "\\\"")
    }</arg_value>\n</tool_call>`,
    tools: tools.todo,
    normalText: "",
    calls: [{ name: "todo_write", args: { todos } }]
  },
  // ---- pythonic (TestPythonicDetector)
  {
    parser: "pythonic",
    spec: "returns text without brackets unchanged",
    source: "test_parse_streaming_no_brackets",
    text: "This is just normal text without any tool calls.",
    tools: tools.location,
    normalText: "This is just normal text without any tool calls.",
    calls: []
  },
  {
    parser: "pythonic",
    spec: "parses a call after text",
    source: "test_parse_streaming_complete_tool_call",
    text: "Here's a tool call: [get_weather(location='New York', unit='celsius')]",
    tools: tools.location,
    normalText: "Here's a tool call:",
    calls: [{ name: "get_weather", args: { location: "New York", unit: "celsius" } }]
  },
  {
    parser: "pythonic",
    spec: "keeps text after the call",
    source: "test_parse_streaming_text_after_tool_call",
    text: "[get_weather(location='Tokyo')] Here's the forecast:",
    tools: tools.location,
    normalText: "Here's the forecast:",
    calls: [{ name: "get_weather", args: { location: "Tokyo" } }]
  },
  {
    parser: "pythonic",
    spec: "parses separate call lists with text between",
    source: "test_parse_streaming_multiple_tool_calls",
    text: "[get_weather(location='Berlin')] and [search(query='restaurants')]",
    tools: tools.location,
    normalText: "and",
    calls: [{ name: "get_weather", args: { location: "Berlin" } }, { name: "search", args: { query: "restaurants" } }]
  },
  {
    parser: "pythonic",
    spec: "reads nested lists and dicts",
    source: "test_parse_streaming_nested_brackets_dict",
    text: "[search(query='test', config={'options': [1, 2], 'nested': {'key': 'value'}})]",
    tools: tools.location,
    normalText: "",
    calls: [{ name: "search", args: { query: "test", config: { options: [1, 2], nested: { key: "value" } } } }]
  },
  {
    parser: "pythonic",
    spec: "reads several calls in one list",
    source: "test_parse_streaming_multiple_tools_with_nested_brackets",
    text: "[get_weather(location='Paris', data=[10, 20]), search(query='test', filters=['a', 'b'])]",
    tools: tools.location,
    normalText: "",
    calls: [
      { name: "get_weather", args: { location: "Paris", data: [10, 20] } },
      { name: "search", args: { query: "test", filters: ["a", "b"] } }
    ]
  },
  {
    parser: "pythonic",
    spec: "removes the Llama-4 python_start/python_end wrapper",
    source: "test_detect_and_parse_with_python_start_and_end_token",
    note: "SGLang keeps both spaces around the call (\"Mars.  In\"); whitespace touching a call is the call's here",
    text:
      "User wants to get the weather in Mars. <|python_start|>[get_weather(location='Mars', unit='celsius')]<|python_end|> In this way we will get the weather in Mars.",
    tools: tools.location,
    normalText: "User wants to get the weather in Mars. In this way we will get the weather in Mars.",
    calls: [{ name: "get_weather", args: { location: "Mars", unit: "celsius" } }]
  },
  {
    parser: "pythonic",
    spec: "reads Python literals True, False, None, numbers and escaped strings",
    text: "[search(query='it\\'s', a=True, b=False, c=None, d=-1.5, e=(1, 2))]",
    tools: tools.location,
    normalText: "",
    calls: [{ name: "search", args: { query: "it's", a: true, b: false, c: null, d: -1.5, e: [1, 2] } }]
  },
  {
    parser: "pythonic",
    spec: "leaves ordinary bracketed text alone and counts an unreadable call list",
    text: "See [1] and [note]. [search(query=unquoted)]",
    tools: tools.location,
    normalText: "See [1] and [note]. [search(query=unquoted)]",
    calls: [],
    malformed: 1
  },
  // ---- gpt-oss
  {
    parser: "gpt-oss",
    spec: "parses a Harmony commentary call and leaves analysis out",
    text:
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
    tools: tools.gptoss,
    normalText: "",
    calls: [{ name: "get_weather", args: { city: "Paris" }, text: "{\"city\": \"Paris\"}" }]
  },
  {
    parser: "gpt-oss",
    spec: "keeps final-channel content and returns marker-free text unchanged",
    text: "<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>",
    tools: tools.gptoss,
    normalText: "It is sunny.",
    calls: []
  },
  {
    parser: "gpt-oss",
    spec: "parses several calls and drops an unknown recipient",
    text:
      "<|channel|>commentary to=functions.search <|constrain|>json<|message|>{\"query\": \"a\", \"topn\": 3}<|call|>" +
      "<|start|>assistant<|channel|>commentary to=browser.open <|constrain|>json<|message|>{\"id\": 1}<|call|>" +
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\"}<|call|>",
    tools: tools.gptoss,
    normalText: "",
    calls: [{ name: "search", args: { query: "a", topn: 3 } }, { name: "get_weather", args: { city: "Oslo" } }],
    dropped: 1
  },
  {
    parser: "gpt-oss",
    spec: "keeps a call with invalid JSON arguments as text and counts it",
    text: "<|channel|>commentary to=functions.search <|constrain|>json<|message|>{query}<|call|>",
    tools: tools.gptoss,
    normalText: "<|channel|>commentary to=functions.search <|constrain|>json<|message|>{query}<|call|>",
    calls: [],
    malformed: 1
  }
]

/** Cases whose chunk splits fall inside numbers, literals and escapes. */
export const numberCases: ReadonlyArray<ToolCase> = [
  {
    parser: "qwen25",
    spec: "reads numbers with fractions and exponents",
    text:
      "<tool_call>{\"name\": \"search\", \"arguments\": {\"a\": -1.5e+3, \"b\": 10, \"c\": true, \"d\": null, \"e\": \"\\u00e9\\n\"}}</tool_call>",
    tools: tools.weather,
    normalText: "",
    calls: [{ name: "search", args: { a: -1500, b: 10, c: true, d: null, e: "é\n" } }]
  },
  {
    parser: "pythonic",
    spec: "reads Python numbers with exponents",
    text: "[search(query='q', n=1e3, m=-2.25)]",
    tools: tools.location,
    normalText: "",
    calls: [{ name: "search", args: { query: "q", n: 1000, m: -2.25 } }]
  }
]

/**
 * The project's rules applied to every format (not SGLang cases): a call to a tool the request did not define is
 * dropped and counted while the known calls around it still parse, and a call whose arguments are broken JSON stays
 * in the content and is counted. Formats whose SGLang cases already cover a rule are not repeated here.
 */
export const ruleCases: ReadonlyArray<ToolCase> = [
  {
    parser: "hermes",
    spec: "drops a call to an undefined tool, keeps the next call and the text around them",
    text:
      "Sure. <tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}</tool_call> Done.",
    tools: tools.weather,
    normalText: "Sure. Done.",
    calls: [{ name: "search", args: { query: "x" }, text: "{\"query\": \"x\"}" }],
    dropped: 1
  },
  {
    parser: "hermes",
    spec: "keeps a call with broken JSON as content and counts it",
    text: "Sure. <tool_call>{\"name\": \"search\", \"arguments\": {\"query\": }}</tool_call>",
    tools: tools.weather,
    normalText: "Sure. <tool_call>{\"name\": \"search\", \"arguments\": {\"query\": }}</tool_call>",
    calls: [],
    malformed: 1
  },
  {
    parser: "qwen3_coder",
    spec: "drops a call to an undefined function, keeps the next call and the text around them",
    text:
      "Let me see.\n<tool_call>\n<function=nope>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n" +
      "<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n</function>\n</tool_call>\nDone.",
    tools: tools.coder,
    normalText: "Let me see.\nDone.",
    calls: [{ name: "get_current_weather", args: { city: "Dallas" } }],
    dropped: 1
  },
  {
    parser: "qwen3_coder",
    spec: "keeps a call block without a function as content and counts it",
    text: "Hi <tool_call>\n<parameter=city>\nDallas\n</parameter>\n</tool_call>",
    tools: tools.coder,
    normalText: "Hi <tool_call>\n<parameter=city>\nDallas\n</parameter>\n</tool_call>",
    calls: [],
    malformed: 1
  },
  {
    parser: "llama3",
    spec: "drops a call to an undefined tool and keeps the next one",
    text:
      "<|python_tag|>{\"name\": \"nope\", \"parameters\": {}}; {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
    tools: tools.tourist,
    normalText: "",
    calls: [{ name: "get_weather", args: { city: "Paris" }, text: "{\"city\": \"Paris\"}" }],
    dropped: 1
  },
  {
    parser: "mistral",
    spec: "drops a call to an undefined tool and keeps the next one in the array",
    text:
      "Ok [TOOL_CALLS] [{\"name\":\"nope\",\"arguments\":{}}, {\"name\":\"make_next_step_decision\",\"arguments\":{\"decision\":\"A\",\"content\":\"B\"}}]",
    tools: tools.decision,
    normalText: "Ok",
    calls: [{
      name: "make_next_step_decision",
      args: { decision: "A", content: "B" },
      text: "{\"decision\":\"A\",\"content\":\"B\"}"
    }],
    dropped: 1
  },
  {
    parser: "mistral",
    spec: "parses several calls in one array",
    text:
      "[TOOL_CALLS] [{\"name\":\"make_next_step_decision\",\"arguments\":{\"decision\":\"A\",\"content\":\"B\"}}, " +
      "{\"name\":\"make_next_step_decision\",\"arguments\":{\"decision\":\"C\",\"content\":\"D\"}}]",
    tools: tools.decision,
    normalText: "",
    calls: [
      { name: "make_next_step_decision", args: { decision: "A", content: "B" } },
      { name: "make_next_step_decision", args: { decision: "C", content: "D" } }
    ]
  },
  {
    parser: "kimi_k2",
    spec: "drops a call to an undefined function and keeps the next one",
    text:
      "Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.nope:0<|tool_call_argument_begin|>{}<|tool_call_end|>" +
      "<|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>",
    tools: tools.tourist,
    normalText: "Checking.",
    calls: [{ name: "get_weather", args: { city: "Paris" }, text: "{\"city\": \"Paris\"}" }],
    dropped: 1
  },
  {
    parser: "kimi_k2",
    spec: "keeps a call with broken JSON as content and counts it",
    text:
      "Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": }" +
      "<|tool_call_end|><|tool_calls_section_end|>",
    tools: tools.tourist,
    normalText:
      "Checking.<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": }<|tool_call_end|>",
    calls: [],
    malformed: 1
  },
  {
    parser: "deepseekv3",
    spec: "drops a call to an undefined function and keeps the next one",
    text:
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>nope\n```json\n{}\n```<｜tool▁call▁end｜>\n" +
      "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\":\"Shanghai\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    tools: tools.tourist,
    normalText: "",
    calls: [{ name: "get_weather", args: { city: "Shanghai" }, text: "{\"city\":\"Shanghai\"}" }],
    dropped: 1
  },
  {
    parser: "deepseekv31",
    spec: "drops a call to an undefined function and keeps the next one",
    text: "Go.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>nope<｜tool▁sep｜>{}<｜tool▁call▁end｜>" +
      "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Tokyo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    tools: tools.tourist,
    normalText: "Go.",
    calls: [{ name: "get_weather", args: { city: "Tokyo" }, text: "{\"city\": \"Tokyo\"}" }],
    dropped: 1
  },
  {
    parser: "deepseekv31",
    spec: "keeps a call with broken JSON as content and counts it",
    text:
      "Go.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": }<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    tools: tools.tourist,
    normalText: "Go.<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": }<｜tool▁call▁end｜>",
    calls: [],
    malformed: 1
  },
  {
    parser: "glm45",
    spec: "parses several calls with text before and after them",
    text: "Hi <tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n</tool_call>\n" +
      "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call> ok",
    tools: tools.glm,
    normalText: "Hi ok",
    calls: [{ name: "get_weather", args: { city: "Beijing" } }, { name: "get_weather", args: { city: "Paris" } }]
  },
  {
    parser: "pythonic",
    spec: "drops a call to an undefined tool and keeps the other call of the list",
    text: "Now [nope(a=1), get_weather(location='Paris')] done",
    tools: tools.location,
    normalText: "Now done",
    calls: [{ name: "get_weather", args: { location: "Paris" } }],
    dropped: 1
  },
  {
    parser: "pythonic",
    spec: "keeps a call list with an unreadable argument as content and counts it",
    text: "Now [get_weather(location='Paris'), search(query=)] done",
    tools: tools.location,
    normalText: "Now [get_weather(location='Paris'), search(query=)] done",
    calls: [],
    malformed: 1
  }
]
