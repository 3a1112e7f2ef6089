module github.com/tessera-llm/tessera

go 1.26

require (
	github.com/cogentcore/webgpu v0.23.0 // indirect
	github.com/dlclark/regexp2 v1.11.5
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/text v0.23.0
	google.golang.org/protobuf v1.36.12 // indirect
)
