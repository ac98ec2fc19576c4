import ArgumentParser
import Foundation
import LiveRelayBenchmarks

@main
struct LiveRelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "liverelay",
        abstract: "LiveRelay: send, serve and emulate Live Activity pushes.",
        subcommands: [Serve.self, Push.self, Channels.self, Emulator.self, Keys.self, Backup.self, Restore.self, Bench.self])

    /// ArgumentParser's own `main`, but for a `ValidationError` thrown by `run()` (a database that
    /// is not there, a bench database seeded with another count): that is still the command's
    /// input at fault, and is reported as a rule broken in `validate()` is, with the usage of the
    /// command that ran. ArgumentParser would print the root's, `liverelay <subcommand>`.
    static func main() async {
        let command: any ParsableCommand
        do {
            command = try await asyncParseAsRoot()
        } catch {
            exit(withError: error)
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                var command = command
                try command.run()
            }
        } catch let error as ValidationError {
            await BenchInterruption.waitIfInterrupted()
            let commandType = type(of: command)
            let name = path(to: commandType).joined(separator: " ")
            printError("Error: \(error.message)\nUsage: \(usageString(for: commandType))\n  See '\(name) --help' for more information.")
            Foundation.exit(ExitStatus.invalidInput.rawValue)
        } catch {
            await BenchInterruption.waitIfInterrupted()
            exit(withError: error)
        }
    }

    /// Every command with the names that reach it, as typed: `["liverelay", "keys", "create"]`.
    static let commands: [(path: [String], command: any ParsableCommand.Type)] = {
        func below(_ command: any ParsableCommand.Type, _ path: [String]) -> [(path: [String], command: any ParsableCommand.Type)] {
            let path = path + [command._commandName]
            return [(path, command)] + command.configuration.subcommands.flatMap { below($0, path) }
        }
        return below(LiveRelayCommand.self, [])
    }()

    static func path(to target: any ParsableCommand.Type) -> [String] {
        commands.first { ObjectIdentifier($0.command) == ObjectIdentifier(target) }?.path ?? [_commandName]
    }
}
