import HammockCore
import HammockJSON

/// The JSON Schema (draft 2020-12) of a configuration file, for editors (yaml-language-server) and other
/// validators: `hammock schema [CONFIG]`. It accepts what `hammock check` accepts, as far as JSON Schema can
/// say: the top level, `defaults`, the common keys of a source, views and `plugins` from hammock's own
/// rules, and each kind's options from its plugin's `optionsSchema` (in its hello). A misspelt key is
/// rejected wherever it stands; a `${NAME}` string is accepted where a word, a duration or a size is
/// expected (and, in a kind's options, a `{{ source }}` template too, filled in before its plugin reads it). Not said: what depends on other values (a view's sources exist, no cycles) or
/// on the machine (a plugin found on PATH), which `hammock check` says.
public enum ConfigurationSchema {
    /// One kind the schema knows: its options' schema, or nil when its plugin gives none (any options).
    public struct Kind: Sendable {
        public var name: String
        public var options: JSONValue?
        public init(name: String, options: JSONValue?) {
            self.name = name
            self.options = options
        }
    }

    /// The schema, with the kinds in the order given.
    public static func schema(kinds: [Kind]) -> JSONValue {
        var properties = JSONObject()
        for key in ConfigurationKeys.topLevel {
            guard let schema = topLevel[key] else {
                preconditionFailure("ConfigurationSchema has no schema for the top-level key \"\(key)\"; add one to `topLevel`")
            }
            properties[key] = JSONSchema.withoutTemplates(schema)
        }
        var schema: JSONObject = [
            "$schema": .string(JSONSchema.draft),
            "title": "hammock configuration",
            "description": "Sources to load and keep fresh, and views over them. Checked by `hammock check FILE`; see docs/configuration.md.",
            "type": "object",
        ]
        schema["properties"] = .object(properties)
        schema["required"] = ["sources"]
        schema["additionalProperties"] = false
        schema["$defs"] = definitions(kinds: kinds)
        return .object(schema)
    }

    /// The schema of each top-level key; `ConfigurationKeys.topLevel` says which there are.
    static let topLevel: [String: JSONValue] = [
        "version": ["const": 1, "description": "The version of the file format; 1 is the only one (optional)."],
        "defaults": [
            "type": "object", "description": "Common keys every source takes unless it says otherwise.",
            "properties": inheritableProperties, "additionalProperties": false,
        ],
        "sources": [
            "type": "object", "minProperties": 1,
            "description": "The sources, id: source. An id holds letters, digits, _ and -.",
            "propertyNames": ["pattern": "^[A-Za-z0-9_-]+$"],
            "additionalProperties": ["$ref": "#/$defs/source"],
        ],
        "views": [
            "type": "object",
            "description": "Views, id: view: several sources merged into one state (loading, error, data, idle). An id holds letters, digits, _ and -.",
            "propertyNames": ["pattern": "^[A-Za-z0-9_-]+$"],
            "additionalProperties": ["$ref": "#/$defs/view"],
        ],
        "bases": [
            "type": "object",
            "description": "Settings written once, name: base: any keys of a source (kind, common keys, a kind's options), which a source with base: NAME takes under its own. Mappings merge key by key; a relative url or path joins the base's. See docs/configuration.md, Bases.",
            "propertyNames": ["pattern": "^[A-Za-z0-9_-]+$"],
            "additionalProperties": ["$ref": "#/$defs/base"],
        ],
        "include": JSONSchema.anyOf(
            "Other files of this configuration (sources:, views:, bases:, include:), and directories of *.yaml files read in name order; relative to this file.",
            [
                ["type": "string", "minLength": 1],
                ["type": "array", "items": ["type": "string", "minLength": 1]],
            ]),
        "limits": [
            "type": "object",
            "description": "Shared budgets, name: { requests: N, per: DURATION }: the sources that name one with limit: together start at most N loads in any window of per, a user's load ahead of polls. See docs/configuration.md, Shared budgets.",
            "propertyNames": ["pattern": "^[A-Za-z0-9_-]+$"],
            "additionalProperties": JSONSchema.object(
                "A budget: at most requests load starts in any window of per.",
                properties: [
                    "requests": JSONSchema.integer(
                        "How many loads may start in any window of per, 1 to \(BudgetLimit.maximumRequests).", minimum: 1,
                        maximum: BudgetLimit.maximumRequests),
                    "per": JSONSchema.duration("The window, such as 1s, 1m or 1h; at most 24h."),
                ],
                required: ["requests", "per"]),
        ],
        "plugins": [
            "type": "object",
            "description": "How to start the plugin of a kind, kind: { command: [program, arguments…] }. A kind without one is looked for as hammock-plugin-KIND beside hammock, on HAMMOCK_PLUGIN_PATH, then PATH.",
            "additionalProperties": JSONSchema.object(
                "How to start this kind's plugin.",
                properties: [
                    "command": JSONSchema.list(
                        "The plugin's program and arguments, such as [python3, plugins/examples/sysmetrics.py]; relative paths are from the directory hammock runs in.",
                        items: ["type": "string"], minItems: 1)
                ],
                required: ["command"]),
        ],
    ]

    // MARK: Sources

    static func duration(_ description: String) -> JSONValue { JSONSchema.duration(description) }

    /// The common keys (`CommonSourceKey`), each as the configuration reader reads it.
    static func commonKey(_ key: CommonSourceKey, kinds: [String]) -> JSONValue {
        switch key {
        case .kind:
            return [
                "anyOf": [["enum": .array(kinds.map(JSONValue.string))], ["type": "string"]],
                "description": .string(
                    "Which plugin loads the source: \(kinds.joined(separator: ", ")), or the kind of a plugin under `plugins:` or on the search path."),
            ]
        case .refresh:
            return duration("Load again every so often, such as 30s or 5m; never two loads of one source at once. Without it the source loads once, then on demand.")
        case .at:
            return JSONSchema.string(
                "Load at these times instead of every refresh: cron's five fields (minute hour day-of-month month day-of-week, e.g. \"*/15 * * * *\", \"0 7 * * mon-fri\") or @yearly, @monthly, @weekly, @daily, @hourly, in the local time zone.")
        case .expiration:
            return duration("How long data counts as fresh for loadIfNeeded (default 30s).")
        case .timeout:
            return duration("The plugin ends a load by then (default 10s); hammock fails the load itself 2 s later.")
        case .retry:
            return JSONSchema.anyOf(
                "After an error a retry can cure, retry by itself with exponential backoff (default: 1s doubling to 60s). off (or false) turns it off; a duration sets the first delay; {initial, max, on} sets each.",
                [
                    ["type": "boolean"],
                    ["enum": ["off", "on"]],
                    ["type": "string", "pattern": .string(JSONSchema.durationPattern)],
                    JSONSchema.object(
                        "The retry policy.",
                        properties: [
                            "initial": duration("The first delay (default 1s)."),
                            "max": duration("The longest delay (default 60s)."),
                            "on": JSONSchema.word(
                                ["transient", "any"],
                                "transient (the default): only errors a retry can cure; any: every error."),
                        ]),
                    JSONSchema.substituted,
                ])
        case .select:
            return JSONSchema.string(
                "A JSON Pointer (RFC 6901), such as /items/0/name: only the value there becomes the content.",
                pattern: "^(/([^~]|~[01])*)*$")
        case .cache:
            return JSONSchema.boolean(
                "Keep the last content on disk and show it at once at the next start, while the source loads as usual (default false).")
        case .keep:
            return JSONSchema.boolean(
                "Keep loading and polling while nobody watches the source: under hammock serve, with no client subscribed to it or to a view or source that reads it (default false). Under hammock run everything is watched anyway.")
        case .limit:
            return JSONSchema.string(
                "The name of a budget under limits: whose starts this source's loads count against; all the sources of a budget together stay within it.",
                pattern: "^[A-Za-z0-9_-]+$")
        case .respectServer:
            return JSONSchema.boolean(
                "Poll no sooner than the server says its answer stays fresh (HTTP Cache-Control max-age, Expires, X-Poll-Interval; at most a day), whatever refresh says (default true). false: poll as refresh says.")
        }
    }

    static let inheritableProperties: JSONValue = {
        var properties = JSONObject()
        for key in CommonSourceKey.allCases where key.isInheritable { properties[key.rawValue] = commonKey(key, kinds: []) }
        return .object(properties)
    }()

    /// A source, or (`isBase`) a base: the same keys, none of them required, since a source takes what its
    /// base does not say.
    static func source(kinds: [Kind], isBase: Bool = false) -> JSONValue {
        var common = JSONObject()
        for key in CommonSourceKey.allCases {
            common[key.rawValue] = JSONSchema.withoutTemplates(commonKey(key, kinds: kinds.map(\.name)))
        }
        common["base"] = [
            "type": "string", "pattern": "^[A-Za-z0-9_-]+$",
            "description": "The name of a base under bases: whose keys this takes, under its own.",
        ]
        var branches: [JSONValue] = []
        for kind in kinds where kind.options != nil {
            branches.append([
                "if": ["properties": ["kind": ["const": .string(kind.name)]], "required": ["kind"]],
                "then": ["$ref": .string(JSONSchemaReferences.fragment(of: optionsPlace(of: kind.name)))],
            ])
        }
        // A kind whose options nobody described (a plugin without an optionsSchema, or one this schema was not
        // made with): its options are its plugin's to check.
        let described = kinds.filter { $0.options != nil }.map { JSONValue.string($0.name) }
        branches.append([
            "if": ["properties": ["kind": ["not": ["enum": .array(described)]]], "required": ["kind"]],
            "then": ["additionalProperties": true],
        ])
        // No kind here: it comes from a base (or, in a base, from the source), which a schema cannot follow;
        // the options are checked by `hammock check`, against the kind that source ends up with.
        branches.append(["if": ["not": ["required": ["kind"]]], "then": ["additionalProperties": true]])
        var schema: JSONObject = [
            "type": "object",
            "description": isBase
                ? "A base: any keys of a source, taken by each source that names it with base:."
                : "A source: its kind (or a base that has one), the common keys (refresh, at, expiration, retry, timeout, select, cache, keep, respect-server, limit), and its kind's options.",
            "properties": .object(common),
            "allOf": .array(branches),
            "unevaluatedProperties": false,
        ]
        if !isBase { schema["anyOf"] = [["required": ["kind"]], ["required": ["base"]]] }
        return .object(schema)
    }

    /// A kind's options schema, applied to a whole source: the common keys are allowed beside its options,
    /// so that its `additionalProperties: false` refuses only what is neither.
    static func withCommonKeys(_ options: JSONValue) -> JSONValue {
        guard case .object(var schema) = options else { return options }
        var properties = schema["properties"]?.objectValue ?? [:]
        for key in CommonSourceKey.names where properties[key] == nil { properties[key] = true }
        schema["properties"] = .object(properties)
        return .object(schema)
    }

    // MARK: Views

    static let renderFields: JSONValue = {
        var properties = JSONObject()
        for field in ViewRender.Field.allCases {
            properties[field.rawValue] = [
                "type": ["string", "number", "boolean", "null"],
                "description": .string("A template such as \"{{ load.content }}\", for the bar's \(field.rawValue) field."),
            ]
        }
        return .object(properties)
    }()

    static let view: JSONValue = {
        let presets = DisplayRule.presets.keys.sorted()
        var render: JSONObject = [
            "type": "object",
            "description": .string(
                "What a bar shows for the view: each field a template over its sources (and \(ViewRender.reservedNames.joined(separator: ", "))), and the same fields under loading, error and idle for that status."),
        ]
        var renderProperties = renderFields.objectValue ?? [:]
        for status in ViewRender.overridableStatuses {
            renderProperties[status.rawValue] = [
                "type": "object", "properties": renderFields, "additionalProperties": false,
                "description": .string("The fields to show while the view is \(status.rawValue)."),
            ]
        }
        render["properties"] = .object(renderProperties)
        render["additionalProperties"] = false

        let buttons = ClickAction.buttons.map(\.key)
        let operations = ClickAction.operations.keys.sorted()
        let onClick: JSONValue = [
            "type": "object",
            "description": .string("What a click on the view in a bar does, button: action. Buttons: \(buttons.joined(separator: ", ")), or a number from 1 to 9."),
            "propertyNames": ["anyOf": [["enum": .array(buttons.map(JSONValue.string))], ["pattern": "^[1-9]$"]]],
            "additionalProperties": JSONSchema.anyOf(
                "\(operations.joined(separator: ", ")) (sent to the view's sources), or { run: COMMAND } (run by /bin/sh -c).",
                [
                    ["enum": .array(operations.map(JSONValue.string))],
                    JSONSchema.object(
                        "A command to run.",
                        properties: ["run": ["type": "string", "pattern": #"\S"#, "description": "The command, run by /bin/sh -c with HAMMOCK_VIEW and HAMMOCK_BUTTON set."]],
                        required: ["run"]),
                    JSONSchema.substituted,
                ]),
        ]
        return JSONSchema.object(
            "A view: several sources merged into one state.",
            properties: [
                "sources": [
                    "type": "array", "items": ["type": "string"], "minItems": 1, "uniqueItems": true,
                    "description": "The ids of the sources it merges.",
                ],
                "ready": JSONSchema.word(["all", "any"], "all (the default): data once every source has data; any: once one has."),
                "display": JSONSchema.anyOf(
                    "Which status wins: a preset (\(presets.joined(separator: ", "))) or a list of rules in order.",
                    [
                        ["enum": .array(presets.map(JSONValue.string))],
                        [
                            "type": "array", "minItems": 1,
                            "items": ["enum": .array(DisplayRule.allCases.map { JSONValue.string($0.rawValue) })],
                        ],
                        JSONSchema.substituted,
                    ]),
                "render": .object(render),
                "on-click": onClick,
            ],
            required: ["sources"])
    }()

    static func definitions(kinds: [Kind]) -> JSONValue {
        var definitions: JSONObject = [
            "source": source(kinds: kinds), "base": source(kinds: kinds, isBase: true), "view": JSONSchema.withoutTemplates(view),
        ]
        for kind in kinds {
            guard let options = kind.options else { continue }
            let place = optionsPlace(of: kind.name)
            definitions[place.tokens[1]] = withCommonKeys(JSONSchemaReferences.rebased(options, at: place))
        }
        return .object(definitions)
    }

    /// Where a kind's options schema stands: once, under `$defs`, with its own `$defs` and `$ref`s below it
    /// (see `JSONSchemaReferences`), so that two kinds' definitions never meet and a reference written
    /// against the options schema's root still finds its target. Its `$ref`s must have been checked with
    /// `JSONSchemaReferences.problems(in:)`.
    public static func optionsPlace(of kind: String) -> JSONPointer {
        JSONPointer(tokens: ["$defs", "kind:\(kind)"])
    }
}
