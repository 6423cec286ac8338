import Foundation
import HammockTestSupport
import Testing

/// Issue 12, item 4: the shell plugin's hello refuses templates inside `script:`; the engine reports the
/// refusal through `hammock check` at the template's line and column, as it does the plugin's own problems.
@Suite("Template rules")
struct TemplateRulesCheckTests {
    @Test("check: a template inside `script:` is refused at its line and column, exit 2")
    func templateInsideAScript() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = try HammockProcess.writeConfig(
            """
            version: 1
            sources:
              post: { kind: fake, content: { id: 1 } }
              user:
                kind: shell
                script: "curl http://x/{{ post.id }} | jq ."
              fine:
                kind: shell
                command: [echo, "{{ post.id }}"]
            """, in: directory)
        //  6     script: "curl ..."          the key starts at column 5
        let run = try await HammockProcess.execute(["check", path])
        #expect(run.termination == .exited(2), "stdout: \(run.stdout) stderr: \(run.stderr)")
        let problems = run.stderr.split(separator: "\n").map(String.init)
            .filter { $0.hasPrefix(path + ":") && $0.wholeMatch(of: /.+:\d+:\d+: .+/) != nil }
        #expect(
            problems == [
                "\(path):6:5: source \"user\": a template inside `script:` is not allowed (a value could change the script); use `command: [...]` so each value is passed as one argument"
            ], "\(run.stderr)")
    }

    @Test("reload: a template inside `script:` refuses the reload at its line and column")
    func templateInsideAScriptOnReload() async throws {
        let directory = try HammockProcess.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func config(script: String) -> String {
            """
            version: 1
            sources:
              post: { kind: fake, content: { id: 1 } }
              user:
                kind: shell
                script: "\(script)"
            """
        }
        let path = try HammockProcess.writeConfig(config(script: "echo 1"), in: directory)
        try await HammockProcess.withRunning(configPath: path) { hammock in
            try await hammock.waitFor(type: "source", id: "user") { $0.event == "newData" }
            _ = try HammockProcess.writeConfig(config(script: "echo {{ post.id }}"), in: directory)
            try hammock.send(controlLine: #"{"op":"reload"}"#)
            let error = try await hammock.waitFor(type: "error", timeout: .seconds(15))
            let message = error["message"]?.stringValue ?? ""
            #expect(message.contains("reload failed"), "\(message)")
            #expect(
                message.contains("\(path):6:5: source \"user\": a template inside `script:` is not allowed"), "\(message)")
        }
    }
}
