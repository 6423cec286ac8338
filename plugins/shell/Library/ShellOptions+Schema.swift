import HammockCore
import HammockJSON

extension ShellOptions {
    /// What `hammock schema` tells editors about a `shell` source's options: the keys `keys` names, each as
    /// `init` reads it (a test holds the two lists equal).
    static let schema: JSONValue = {
        guard
            case .object(var schema) = JSONSchema.object(
                "A shell source: runs a command per load (mode: poll) or keeps one running and takes each line it prints (mode: stream). Give command or script.",
                properties: [
                    "command": JSONSchema.list(
                        "The program and its arguments, run directly without a shell: each {{ source.key }} value is passed as one argument, exactly.",
                        items: ["type": "string"], minItems: 1)
                        .merging(["prefixItems": [["minLength": 1, "description": "The program: a name on PATH or a path."]]]),
                    "script": JSONSchema.string(
                        "A script run by /bin/sh -c, for pipes and redirections. It may hold no {{ }} template (a value could change the script); use command for that.")
                        .merging(["pattern": #"\S"#]),
                    "env": JSONSchema.map(
                        "Environment variables added to hammock's, name: value. ${NAME} values here are secrets, redacted from every output.",
                        values: ["type": ["string", "number", "boolean"]])
                        .merging(["propertyNames": ["pattern": #"^[^=\u0000]+$"#]]),
                    "cwd": JSONSchema.string("The working directory of the command (default: hammock's own).", minLength: 1),
                    "parse": JSONSchema.word(
                        OutputFormat.allCases.map(\.rawValue),
                        "How stdout becomes content: text (the default; one string, without its final newline), lines (a list of strings), json, jsonl (JSON Lines: one value per line, as an array) or yaml. In stream mode each line is one value, so only text or json."),
                    "maxBytes": JSONSchema.size(
                        "The most output to read, in bytes or as a size such as 64KiB or 10MiB (the default); more is an error with code tooLarge."),
                    "mode": JSONSchema.word(
                        Mode.allNames,
                        "poll (the default): run the command at each load. stream: keep one command running; each line it prints is new content."),
                ])
        else { preconditionFailure("JSONSchema.object gives an object") }
        schema["oneOf"] = [["required": ["command"]], ["required": ["script"]]]
        schema["if"] = ["properties": ["mode": ["const": "stream"]], "required": ["mode"]]
        schema["then"] = ["properties": ["parse": ["not": ["enum": .array(OutputFormat.allCases.filter { !$0.worksPerLine }.map { JSONValue.string($0.rawValue) })]]]]
        return .object(schema)
    }()
}

extension JSONValue {
    /// This object schema with `members` added.
    func merging(_ members: JSONObject) -> JSONValue {
        guard case .object(var object) = self else { return self }
        for (key, value) in members { object[key] = value }
        return .object(object)
    }
}
