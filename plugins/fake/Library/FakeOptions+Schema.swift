import HammockCore
import HammockJSON

extension FakeOptions {
    /// What `hammock schema` tells editors about a `fake` source's options: the keys `known` names, each as
    /// `init` reads it (a test holds the two lists equal).
    static let schema: JSONValue = JSONSchema.object(
        "A fake source, built into hammock: answers each load with the content (or state) written here. For trying views and consumers without a real source.",
        properties: [
            "content": ["description": "The content of every load: any value (default null)."],
            "state": JSONSchema.word(
                Outcome.allCases.map(\.rawValue),
                "data (the default): answer with content; loading: never answer; error: answer with error."),
            "error": JSONSchema.anyOf(
                "With state: error, the error to answer with: a message, or {message, httpStatus, exitStatus, code}.",
                [
                    ["type": "string"],
                    [
                        "type": "object",
                        "properties": [
                            "message": ["type": "string"], "httpStatus": ["type": "integer"], "exitStatus": ["type": "integer"],
                            "code": ["type": "string"],
                        ],
                    ],
                ]),
            "delay": JSONSchema.duration("How long each load takes, such as 250ms or 2s (default 0s)."),
        ])
}
